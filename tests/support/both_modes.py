"""One scenario, run on classic Spark (in the test's process) and on Spark Connect (this module as a
separate process: a process on Connect puts pyspark's functions in Connect mode for good).

The demo's pipeline (``spark/examples/weblogs.py``) over an hour of the demo's sample logs — one
file with a broken line, so a lot fails once and is redone — plus a job that opens a lookup table
itself, as the flights example does (an undeclared read): ``label`` joins each hit's status with
``lookups/statuses/statuses.csv``.

    python -m support.both_modes sc://host:port DB_URL FOLDER
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from lotline.domain.ingress import TimeRule
from lotline.domain.lots import Interval
from lotline.services import Lineage, open_lineage
from lotline.services.ingest import IngestRequest
from lotline.spark.examples import sample_logs
from lotline.spark.pipeline import Lot, Pipeline, load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import RunSummary, run_pipeline
from lotline.spark.runner import LotRunner
from lotline.storage.objects import Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NS = "both"
DAY = datetime(2023, 1, 1, tzinfo=UTC)
WINDOWS = 12  # 10:00-11:00: twelve lots of parse, one of hourly_counts
MALFORMED = 4  # 10:20's file has a broken line: its lot fails, the sender fixes it, it is redone
DEMO = Path(sample_logs.__file__).with_name("weblogs.py")
TIME = r"(?P<year>\d{4})/(?P<month>\d\d)/(?P<day>\d\d)/(?P<hour>\d\d)(?P<minute>\d\d)\.log$"


def pipeline(folder: Path) -> Pipeline:
    """The demo's pipeline and ``label``, which reads a lookup it does not declare."""
    from pyspark.sql import functions as F

    p = load_pipeline(str(DEMO))
    p.namespace = NS
    lookup = folder / "lookups" / "statuses"
    labelled = p.dataset("labelled", format="parquet", interval="PT5M")

    @p.job(inputs=[p.datasets["hits"]], output=labelled)
    def label(hits: DataFrame, lot: Lot) -> DataFrame:
        statuses = lot.spark.read.option("header", "true").csv(str(lookup))
        keyed = hits.select("path", F.col("status").cast("string").alias("status"), "bytes")
        return keyed.join(statuses, "status").select("path", F.col("label").alias("outcome"), "bytes")

    return p


def prepare(folder: Path) -> None:
    """The landing folder's sample logs and the lookup table."""
    sample_logs.write_access_logs(
        folder / "landing", DAY + timedelta(hours=10), WINDOWS, malformed=frozenset({MALFORMED})
    )
    lookup = folder / "lookups" / "statuses"
    lookup.mkdir(parents=True)
    rows = [(200, "ok"), (301, "moved"), (304, "cached"), (404, "missing"), (500, "broken"), (503, "down")]
    (lookup / "statuses.csv").write_text("status,label\n" + "".join(f"{s},{label}\n" for s, label in rows))


def ingest(lineage: Lineage, folder: Path, namespace: str = NS) -> None:
    """``lotline ingest`` of the landing folder's hour into lots of raw_logs."""
    request = IngestRequest(
        namespace=namespace,
        dataset="raw_logs",
        landing=str(folder / "landing"),
        interval=Interval.parse("PT5M"),
        time_rule=TimeRule.parse("path:" + TIME),
        start=DAY + timedelta(hours=10),
        end=DAY + timedelta(hours=11),
    )
    lineage.ingest.ingest(request, now=DAY + timedelta(days=1))


def run(lineage: Lineage, spark: SparkSession, folder: Path) -> list[RunSummary]:
    """Ingest, run (one lot fails on its broken line), fix the file, ingest and run again."""
    p = pipeline(folder)
    register(lineage, p)
    ingest(lineage, folder)
    runner = LotRunner(lineage, p, spark)
    first = run_pipeline(runner, p.ordered_jobs(), worker="w", retries=0)
    window = DAY + timedelta(hours=10, minutes=5 * MALFORMED)
    sample_logs.repair(
        sample_logs.LandingFile(sample_logs.landing_path(folder / "landing", window), window, 0)
    )
    ingest(lineage, folder)
    return [first, run_pipeline(runner, p.ordered_jobs(), worker="w", retries=0)]


def counting_requests(spark: SparkSession) -> Counter[str]:
    """The requests the Connect client sends from now on, by kind (``execute:write_operation``,
    ``analyze:schema``, …): its gRPC stub's two calls, passed through unchanged."""
    asked: Counter[str] = Counter()
    stub = cast(Any, spark).client._stub
    execute, analyze = stub.ExecutePlan, stub.AnalyzePlan

    def execute_plan(request: Any, *args: Any, **kwargs: Any) -> Any:
        plan = request.plan
        op = plan.WhichOneof("op_type")
        asked[f"execute:{plan.command.WhichOneof('command_type') if op == 'command' else op}"] += 1
        return execute(request, *args, **kwargs)

    def analyze_plan(request: Any, *args: Any, **kwargs: Any) -> Any:
        asked[f"analyze:{request.WhichOneof('analyze')}"] += 1
        return analyze(request, *args, **kwargs)

    stub.ExecutePlan, stub.AnalyzePlan = execute_plan, analyze_plan
    return asked


def main(url: str, db_url: str, folder: str) -> None:
    """The scenario on Connect; the requests the client sent go to ``FOLDER/requests.json``."""
    from lotline.spark.connect import parse_url, start

    spark = start(parse_url(url), "lotline both modes", {"spark.sql.session.timeZone": "UTC"})
    root = Path(folder)
    asked = counting_requests(spark)
    try:
        with open_lineage(db_url, Storage(str(root / "warehouse"))) as lineage:
            run(lineage, spark, root)
    finally:
        spark.stop()
    (root / "requests.json").write_text(json.dumps(asked))


if __name__ == "__main__":
    main(*sys.argv[1:])
