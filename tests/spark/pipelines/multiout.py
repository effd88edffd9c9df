"""A job with two outputs (``split``: ``kept`` and ``rejected`` lots from one pass over ``numbers``),
a consumer of its second output (``tally``), and child work with two outputs (``parity``).

``rejected`` is written second; its UDF can stop the run between the two writes: ``PROBE`` (a test
sets it, or ``MULTIOUT_PROBE``) names a database and a file: from Spark's Python worker, a process
of its own, it records what a reader sees of ``kept`` then, and fails the write; ``MULTIOUT_KILL``
makes it SIGKILL the driver instead (a real ``lotline run``: ``DRIVER`` is the pid of the process
that loaded this file)."""

from __future__ import annotations

import json
import os
import signal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lotline.spark.pipeline import Pipeline

p = Pipeline("multiout")
numbers = p.dataset("numbers", format="text", interval="PT1H")
kept = p.dataset("kept", format="parquet", interval="PT1H")
rejected = p.dataset("rejected", format="parquet", interval="PT1H")
tally = p.dataset("tally", format="parquet", interval="PT1H")
evens = p.dataset("evens", format="parquet", interval="PT1H")
odds = p.dataset("odds", format="parquet", interval="PT1H")

DRIVER = os.getpid()
KILL = os.environ.get("MULTIOUT_KILL") == "1"
#: {"url": database URL, "out": file to write what a reader saw, "lot": the lot}
PROBE: dict[str, str] | None = (
    json.loads(os.environ["MULTIOUT_PROBE"]) if "MULTIOUT_PROBE" in os.environ else None
)


def between_writes(value: int) -> int:
    """Runs while ``rejected`` is written, after ``kept`` was."""
    if KILL:
        os.kill(DRIVER, signal.SIGKILL)
    if PROBE is not None:
        from lotline.services import Lineage
        from lotline.store.engine import Store

        with Lineage.over(Store(PROBE["url"])) as lineage:
            [status] = lineage.lots.status("multiout", dataset="kept")
            seen = {
                "readable": sorted(lineage.manifests.readable("multiout", "kept", [PROBE["lot"]])),
                "status": status.status.value,
            }
        with open(PROBE["out"], "w") as out:
            json.dump(seen, out)
        raise ValueError("rejected output refused between the writes")
    return value


@p.job(inputs=[numbers], outputs=[kept, rejected])
def split(numbers: DataFrame) -> dict[str, DataFrame]:
    parsed = numbers.select(F.col("value").cast("int").alias("n"))
    check = F.udf(between_writes, "int")
    return {"kept": parsed.where("n >= 0"), "rejected": parsed.where("n < 0").select(check("n").alias("n"))}


@p.job(inputs=[rejected], output=tally)
def count_rejected(rejected: DataFrame) -> DataFrame:
    return rejected.groupBy().count()


@p.job(inputs=[numbers], outputs=[evens, odds], partition_by=1)
def parity(numbers: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Child work with two outputs: each part (one object of ``numbers``) writes both."""
    parsed = numbers.select(F.col("value").cast("int").alias("n"))
    return parsed.where("n % 2 = 0"), parsed.where("n % 2 != 0")
