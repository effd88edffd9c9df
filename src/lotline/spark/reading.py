"""A dataset's READY lots as one Spark DataFrame: exactly the objects their current manifests list
(``domain.reading.Published``), never a listing of the dataset's folder, which also holds superseded
and failed attempts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from lotline.domain.errors import InvalidInput
from lotline.domain.reading import Published, check_lot_column
from lotline.spark.frames import TEXT_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: A uri's scheme and the slashes after it: ``file:///x``, ``file:/x`` and ``s3a://b/x`` name the
#: objects ``x`` and ``b/x`` whatever the scheme's spelling (Spark says ``file:/``, s3 is ``s3a``).
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/*")
_KEY = "__lotline_object"


def object_key(uri: str) -> str:
    """What both a manifest's uri and the path Spark reports for it come to."""
    return _SCHEME.sub("", uri)


def read_published(
    spark: SparkSession,
    published: Published,
    *,
    lot_column: str | None = None,
    schema: str | None = None,
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """One DataFrame over every object of ``published`` (one relation, however many lots), with the
    lot id in ``lot_column`` when asked. ``schema``/``options`` as for ``spark.read``; without a
    schema, a text dataset has ``value``, the others the columns their files have."""
    format_ = published.format()
    options = dict(options or {})
    if schema is None and format_ == "text":
        schema = TEXT_SCHEMA
    listed = list(published.objects())
    if not listed:
        return _empty(spark, published, format_, schema, options, lot_column)
    reader = spark.read.format(listed[0][1].format).options(**options)
    if schema is not None:
        reader = reader.schema(schema)
    frame = reader.load([o.uri for _, o in listed])
    if lot_column is None:
        return frame
    check_lot_column(lot_column, [*frame.columns, _KEY])
    lots = spark.createDataFrame(
        [(object_key(o.uri), lot) for lot, o in listed], f"`{_KEY}` string, `{lot_column}` string"
    )
    from pyspark.sql import functions as F

    joined = frame.withColumn(_KEY, _reported_key()).join(F.broadcast(lots), _KEY, "left")
    lot = F.col(f"`{lot_column}`")
    unmatched = F.raise_error(F.concat(F.lit("lotline: no lot lists the object "), F.col(_KEY)))
    return joined.withColumn(lot_column, F.when(lot.isNull(), unmatched).otherwise(lot)).drop(_KEY)


def _reported_key() -> Column:
    """``object_key`` of the file Spark read the row from: Spark reports it percent-encoded (a
    Hadoop ``Path`` as a URI), which ``url_decode`` undoes once its ``+`` (literal in a path, a
    space to a URL decoder) is protected."""
    from pyspark.sql import functions as F

    reported = F.regexp_replace(F.col("_metadata.file_path"), r"\+", "%2B")
    return F.regexp_replace(F.url_decode(reported), _SCHEME.pattern, "")


def _empty(
    spark: SparkSession,
    published: Published,
    format_: str | None,
    schema: str | None,
    options: Mapping[str, str],
    lot_column: str | None,
) -> DataFrame:
    """No lot of the range has data (or none is READY): no rows, the dataset's columns, read from the
    newest lot that has data when no schema is given."""
    if schema is None and published.sample is not None and format_ is not None:
        frame = spark.read.format(format_).options(**options).load(published.sample.uri).limit(0)
    elif schema is not None:
        frame = spark.createDataFrame([], schema)
    else:
        raise InvalidInput(
            f"{published.dataset}: no READY lot has data, so its columns are unknown; "
            "pass schema='col type, ...'."
        )
    if lot_column is None:
        return frame
    check_lot_column(lot_column, frame.columns)
    from pyspark.sql import functions as F

    return frame.withColumn(lot_column, F.lit(None).cast("string"))
