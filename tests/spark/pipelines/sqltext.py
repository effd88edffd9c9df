"""``spark.sql`` text over a lot's input DataFrame (``{split}``): on Spark Connect, openlineage-sql
parses it on the client for its reads and column sources (tests/spark/test_connect_edges.py)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lotline.spark.pipeline import Lot, Pipeline

p = Pipeline("sqltext")
raw = p.dataset("raw_logs", format="text", interval="PT30M")
pages = p.dataset("pages", format="parquet", interval="PT30M")


@p.job(inputs=[raw], output=pages)
def count_pages(raw_logs: DataFrame, lot: Lot) -> DataFrame:
    split = raw_logs.select(F.split("value", " ")[1].alias("path"))
    query = "SELECT upper(path) AS page, count(*) AS hits FROM {split} GROUP BY upper(path)"
    return lot.spark.sql(query, split=split)
