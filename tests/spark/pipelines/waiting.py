"""A job whose Spark task waits (a Python UDF, inside Spark like a long job) until the test lets it
go: the Ctrl-C test interrupts it there (``support/waiting.py``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lotline.spark.pipeline import Lot, Pipeline

p = Pipeline("waiting")
raw = p.dataset("raw", format="text", interval="PT1H")
waited = p.dataset("waited", format="parquet", interval="PT1H")

#: Read where the file is loaded and pickled with the UDF (by value, as the pipeline file's code
#: is): on Spark Connect the UDF runs in the server's Python worker, whose environment is the server's.
WAIT = os.environ.get("LOTLINE_TEST_WAIT", "")


def wait_for_release(value: str) -> str:
    """Says it started (with the pid of the Python worker running it), then waits for ``release``."""
    folder = Path(WAIT)
    (folder / "started").write_text(str(os.getpid()))
    while not (folder / "release").exists():
        time.sleep(0.1)
    return value


@p.job(inputs=[raw], output=waited)
def wait(raw: DataFrame, lot: Lot) -> DataFrame:
    return raw.select(F.udf(wait_for_release, "string")("value").alias("value"))
