"""A UDF whose function comes from a module beside this file (``pagenames``, which imports
``pathstyle``): the pipeline file is pickled by value, its helpers by reference, so the workers
that run the UDF must be able to import them."""

from __future__ import annotations

from pagenames import page_name
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lotline.spark.pipeline import Lot, Pipeline

p = Pipeline("helped")
raw = p.dataset("raw_logs", format="text", interval="PT30M")
pages = p.dataset("pages", format="parquet", interval="PT30M")


@p.job(inputs=[raw], output=pages)
def name_pages(raw_logs: DataFrame, lot: Lot) -> DataFrame:
    name = F.udf(page_name, "string")
    return raw_logs.select(name(F.split("value", " ")[1]).alias("page"))
