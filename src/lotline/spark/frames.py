"""DataFrames in and out of lots: read exactly the objects manifests list, write one attempt's folder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lotline.domain.errors import InvalidInput
from lotline.spark.pipeline import DatasetSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The one column Spark's text source reads and writes.
TEXT_SCHEMA = "value string"


def read_objects(spark: SparkSession, dataset: DatasetSpec, uris: Sequence[str]) -> DataFrame:
    """One DataFrame over the listed objects (never a folder listing), with the dataset's options."""
    reader = spark.read.format(dataset.format).options(**dataset.options)
    if dataset.schema is not None:
        reader = reader.schema(dataset.schema)
    return reader.load(list(uris))


def empty_frame(spark: SparkSession, dataset: DatasetSpec, job: str) -> DataFrame:
    """The input of a job whose lots of ``dataset`` hold no data: no rows, the declared columns."""
    schema = dataset.schema or (TEXT_SCHEMA if dataset.format == "text" else None)
    if schema is None:
        raise InvalidInput(
            f"job {job}: input {dataset.name} has no data in these lots and declares no schema, so "
            f"its columns are unknown; declare it with schema='col type, ...'."
        )
    return spark.createDataFrame([], schema)


def write_attempt(frame: DataFrame, dataset: DatasetSpec, location: str) -> None:
    """Write to a fresh attempt location; ``error`` (if it exists): an attempt's folder is never reused."""
    writer = frame.write.mode("error").format(dataset.format)  # Spark Connect knows no "errorifexists"
    if dataset.format == "csv" and "header" in dataset.options:
        writer = writer.option("header", dataset.options["header"])  # read back the way it was written
    writer.save(location)
