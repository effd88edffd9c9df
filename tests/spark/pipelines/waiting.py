"""A job whose Spark task waits (a Python UDF, inside Spark like a long job) until the test lets it
go (``support/waiting.py``): the Ctrl-C test interrupts it there."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lotline.spark.pipeline import Lot, Pipeline
from support.waiting import wait_for_release

p = Pipeline("waiting")
raw = p.dataset("raw", format="text", interval="PT1H")
waited = p.dataset("waited", format="parquet", interval="PT1H")


@p.job(inputs=[raw], output=waited)
def wait(raw: DataFrame, lot: Lot) -> DataFrame:
    return raw.select(F.udf(wait_for_release, "string")("value").alias("value"))
