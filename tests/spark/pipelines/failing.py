"""Lots that fail the ways real data makes Spark fail: a malformed CSV file read with FAILFAST
(``parse``), a Python UDF raising (``check``), for the one-line reasons of ``test_failures.py``."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lotline.spark.pipeline import Lot, Pipeline

p = Pipeline("failing")
rows = p.dataset("rows", format="csv", interval="PT1H", options={"mode": "FAILFAST"}, schema="a int, b int")
parsed = p.dataset("parsed", format="parquet", interval="PT1H")
checked = p.dataset("checked", format="parquet", interval="PT1H")


def positive(value: int) -> int:
    if value < 0:
        raise ValueError(f"negative value {value}")
    return value


@p.job(inputs=[rows], output=parsed)
def parse(rows: DataFrame, lot: Lot) -> DataFrame:
    return rows


@p.job(inputs=[parsed], output=checked)
def check(parsed: DataFrame, lot: Lot) -> DataFrame:
    return parsed.select(F.udf(positive, "int")("a").alias("a"), "b")
