"""A dataset's READY lots as one Arrow table (``pyarrow``, imported when called): the Parquet objects
their current manifests list (``domain.reading.Published``), read through the storage's fsspec file
system, so a local warehouse and ``s3://`` read alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lotline.domain.errors import InvalidInput
from lotline.domain.reading import Published, check_lot_column
from lotline.storage.objects import Storage

if TYPE_CHECKING:
    import pyarrow as pa


def read_table(storage: Storage, published: Published, *, lot_column: str | None = None) -> pa.Table:
    """Every object's rows, lot after lot, with the lot id in ``lot_column`` when asked. Lots with
    no data add no rows; with no data at all, the table has the columns of the dataset's newest lot
    with data (none if there is none)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    format_ = published.format()
    if format_ not in (None, "parquet"):
        raise InvalidInput(
            f"{published.dataset}: read_arrow reads Parquet, its objects are {format_}; read them with "
            "lotline.read (Spark) or list them with lotline files."
        )
    tables = []
    for lot, found in published.objects():
        with storage.open_input(found.uri) as handle:
            table = pq.read_table(handle)
        if lot_column is not None:
            check_lot_column(lot_column, table.column_names)
            table = table.append_column(lot_column, pa.array([lot] * table.num_rows, pa.string()))
        tables.append(table)
    if tables:
        return pa.concat_tables(tables, promote_options="default")
    schema = pa.schema([])
    if published.sample is not None:
        with storage.open_input(published.sample.uri) as handle:
            schema = pq.read_schema(handle)
    if lot_column is not None:
        check_lot_column(lot_column, schema.names)
        schema = schema.append(pa.field(lot_column, pa.string()))
    return schema.empty_table()
