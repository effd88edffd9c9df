"""Reading lotline's data from anything else (docs/api.md "Reading datasets from Python"): a
dataset's READY lots of a time range, exactly the objects their current manifests list.

``lotline.read`` (Spark), ``lotline.read_arrow`` (``.to_pandas()`` for pandas) and ``lotline.published``
(the list itself, for DuckDB or any tool) take the database and warehouse from the configuration
(``LOTLINE_DB_URL``, ``LOTLINE_WAREHOUSE``, lotline.toml), or the ``lineage`` given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lotline.domain.reading import Published, TimeBound
from lotline.services import Lineage, open_configured
from lotline.services.config import load_settings

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["published", "read", "read_arrow"]


def published(
    dataset: str,
    *,
    namespace: str | None = None,
    from_: TimeBound = None,
    to: TimeBound = None,
    lineage: Lineage | None = None,
) -> Published:
    """The READY lots of ``dataset`` whose windows meet ``[from_, to)`` (RFC 3339 instants, dates or
    aware datetimes; None: open), each with its current manifest. ``namespace``: as ``-n`` of the
    commands (default: lotline.toml's, else the database's only one)."""
    own = lineage is None
    lineage = lineage or open_configured(load_settings(), create=False)
    try:
        chosen = lineage.catalog.resolve_namespace(namespace, load_settings().namespace)
        return lineage.reading.published(chosen, dataset, from_, to)
    finally:
        if own:
            lineage.close()


def read(
    spark: SparkSession,
    dataset: str,
    *,
    namespace: str | None = None,
    from_: TimeBound = None,
    to: TimeBound = None,
    lot_column: str | None = None,
    schema: str | None = None,
    options: Mapping[str, str] | None = None,
    lineage: Lineage | None = None,
) -> DataFrame:
    """A Spark DataFrame over the READY lots of the range (``published``), with each row's lot id in
    ``lot_column`` when asked. The lots are those READY when called; the DataFrame reads their
    objects whenever an action runs."""
    from lotline.spark.reading import read_published

    found = published(dataset, namespace=namespace, from_=from_, to=to, lineage=lineage)
    return read_published(spark, found, lot_column=lot_column, schema=schema, options=options)


def read_arrow(
    dataset: str,
    *,
    namespace: str | None = None,
    from_: TimeBound = None,
    to: TimeBound = None,
    lot_column: str | None = None,
    lineage: Lineage | None = None,
) -> pa.Table:
    """The READY lots of the range as one Arrow table (Parquet datasets; needs ``pyarrow``)."""
    from lotline.storage.arrow import read_table

    own = lineage is None
    lineage = lineage or open_configured(load_settings(), create=False)
    try:
        found = published(dataset, namespace=namespace, from_=from_, to=to, lineage=lineage)
        return read_table(lineage.storage, found, lot_column=lot_column)
    finally:
        if own:
            lineage.close()
