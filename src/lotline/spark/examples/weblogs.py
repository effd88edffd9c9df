"""Web access logs, lot by lot: the pipeline that ``lotline demo`` runs. Copy it to start your own.

    raw_logs     text, PT5M lots, filled by ``lotline ingest`` from a landing folder
      -> parse          -> hits           parquet, PT5M: one row per request
      -> hourly_counts  -> hourly_hits    parquet, PT1H: 12 five-minute lots make one hour
      -> daily_report   -> daily_report   parquet, P1D:  24 hours make one day

Each transform receives its inputs as DataFrames built only from the objects listed in the input
lots' manifests, and ``lot`` (id, window, run id, attempt, Spark session, logger).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lotline.spark.pipeline import Lot, Pipeline, expect

p = Pipeline("weblogs")
# The web server writes a file only when it served a request: a quiet five minutes sends nothing, so
# an interval with no file, five minutes after its end, is empty (declared by this policy), not missing.
raw = p.dataset("raw_logs", format="text", interval="PT5M", late_after="PT5M", absent="empty")
hits = p.dataset(
    "hits",
    format="parquet",
    interval="PT5M",
    schema="ts timestamp, ip string, method string, path string, status int, bytes long",
)
hourly = p.dataset(
    "hourly_hits",
    format="parquet",
    interval="PT1H",
    schema="hour timestamp, path string, status int, hits long, bytes long",
)
daily = p.dataset(
    "daily_report", format="parquet", interval="P1D", schema="path string, hits long, errors long, bytes long"
)

#: Common Log Format: host ident user [time] "method path protocol" status bytes
LINE = r'^(\S+) \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+|-)$'
COLUMNS = ("ip", "ts", "method", "path", "status", "bytes")


# A server error is worth knowing about, not worth holding the lot back: `warn` publishes the lot and
# records how many rows failed (the version's dataQualityAssertions facet; the run's summary).
@p.job(inputs=[raw], output=hits, checks=[expect("status < 500", on_fail="warn")])
def parse(raw_logs: DataFrame, lot: Lot) -> DataFrame:
    """Lines into columns. A line that does not parse fails the lot: bad data stops here, and
    nothing downstream ever reads it."""
    fields = [F.regexp_extract("value", LINE, group).alias(name) for group, name in enumerate(COLUMNS, 1)]
    malformed = F.raise_error(F.concat(F.lit(f"lot {lot.id}: malformed log line: "), F.col("value")))
    # The check is a filter, so it runs before any column below is parsed.
    checked = raw_logs.select("value", *fields).where(F.when(F.col("ip") == "", malformed).otherwise(True))
    return checked.select(
        F.to_timestamp("ts", "dd/MMM/yyyy:HH:mm:ss Z").alias("ts"),
        "ip",
        "method",
        "path",
        F.col("status").cast("int").alias("status"),
        F.when(F.col("bytes") == "-", "0").otherwise(F.col("bytes")).cast("long").alias("bytes"),
    )


@p.job(inputs=[hits], output=hourly)
def hourly_counts(hits: DataFrame, lot: Lot) -> DataFrame:
    """Requests and bytes per path and status in the hour."""
    return hits.groupBy(F.date_trunc("hour", "ts").alias("hour"), "path", "status").agg(
        F.count("*").alias("hits"), F.sum("bytes").alias("bytes")
    )


@p.job(inputs=[hourly], output=daily)
def daily_report(hourly_hits: DataFrame, lot: Lot) -> DataFrame:
    """The day per path: requests, errors (status 400 and above), bytes."""
    errors = F.when(F.col("status") >= 400, F.col("hits")).otherwise(F.lit(0))
    return hourly_hits.groupBy("path").agg(
        F.sum("hits").alias("hits"), F.sum(errors).alias("errors"), F.sum("bytes").alias("bytes")
    )
