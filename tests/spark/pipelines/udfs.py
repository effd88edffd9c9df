"""Python UDFs defined at module level of a pipeline file (issue 29, point 11): a plain function
wrapped in the job, a decorated one, and a helper and a constant they reach through the module's
globals. Executors cannot import this file's module; they must get its code with the UDFs."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lotline.spark.pipeline import Lot, Pipeline

PREFIX = "page:"

p = Pipeline("udfs")
raw = p.dataset("raw_logs", format="text", interval="PT30M")
pages = p.dataset("pages", format="parquet", interval="PT30M")


def _clean(url: str) -> str:
    return url.strip("/").upper()


def page_name(url: str) -> str:
    return PREFIX + _clean(url)


@F.udf("int")
def status_class(status: str) -> int:
    return int(status) // 100


@p.job(inputs=[raw], output=pages)
def name_pages(raw_logs: DataFrame, lot: Lot) -> DataFrame:
    parts = F.split("value", " ")
    name = F.udf(page_name, "string")
    return raw_logs.select(name(parts[1]).alias("page"), status_class(parts[2]).alias("class"))
