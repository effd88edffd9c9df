"""The SQL that differs between SQLite and PostgreSQL: upserts, multi-row inserts, row locks, the
one-holder lock, ``NOTIFY``. Statements are built for the connection's dialect; how connections are
made, kept alive and their errors translated is the drivers' business (``drivers.py``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

import orjson
from sqlalchemy import Connection, Row, Table, TextClause, any_, bindparam, func, select, text
from sqlalchemy import types as sa_types
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.sql.elements import ColumnElement

from lotline.store.drivers import WRITE_OPTION

T = TypeVar("T")
P = ParamSpec("P")


def upsert_insert(connection: Connection, table: Table) -> Any:
    """An ``INSERT`` that supports ``on_conflict_do_update(…, where=…)`` in the connection's dialect.

    Both dialects take the same arguments; conditional upserts are how a claim takes a lot
    atomically (a row that exists is updated only if its status still allows it).
    """
    return _insert(connection.dialect.name, table)


def _insert(dialect_name: str, table: Table) -> Any:
    """The dialect's own ``INSERT`` (the one with ``on_conflict_*``): both take the same arguments."""
    return (postgresql.insert if dialect_name == "postgresql" else sqlite.insert)(table)


def insert_ignoring_conflicts(
    connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]], keys: Sequence[str]
) -> None:
    """``INSERT … ON CONFLICT (keys) DO NOTHING`` in the connection's dialect."""
    if not rows:
        return
    connection.execute(ignoring_conflicts(connection.dialect.name, table, tuple(keys)), list(rows))


@functools.cache
def ignoring_conflicts(dialect_name: str, table: Table, keys: tuple[str, ...]) -> Any:
    """The dialect's ``INSERT … ON CONFLICT (keys) DO NOTHING``, built once per table: the statement
    runs for every event (its rows may also come from a ``SELECT``)."""
    return _insert(dialect_name, table).on_conflict_do_nothing(index_elements=list(keys))


def increment_returning(connection: Connection, table: Table, key: str, key_value: Any, column: str) -> int:
    """A counter row, incremented (or created at 1) by one ``INSERT … ON CONFLICT DO UPDATE …
    RETURNING``; the row stays locked until commit."""
    statement = _increment(connection.dialect.name, table, key, column)
    value: int = connection.execute(statement, {"b_key": key_value}).scalar_one()
    return value


@functools.cache
def _increment(dialect_name: str, table: Table, key: str, column: str) -> Any:
    """Built once per table: it runs for every version."""
    new = _insert(dialect_name, table).values({key: bindparam("b_key"), column: 1})
    return new.on_conflict_do_update(index_elements=[key], set_={column: table.c[column] + 1}).returning(
        table.c[column]
    )


def locks_rows(connection: Connection) -> bool:
    """Whether ``SELECT … FOR UPDATE`` means anything here (SQLite locks the whole file instead)."""
    return connection.dialect.name == "postgresql"


def insert_new_rows(
    connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]], keys: Sequence[str], column: str
) -> list[Any]:
    """``INSERT … ON CONFLICT (keys) DO NOTHING RETURNING column`` for every row, in the order
    given: the values of ``column`` of the rows that were new (a conflicting row, or a repeat
    of an earlier row, returns nothing). All rows must have the same keys.

    PostgreSQL: the rows travel as one JSON document (``INSERT … SELECT … FROM
    jsonb_array_elements(:rows)``), so the statement's text is the same for any number of rows and
    is parsed and planned once: psycopg re-parses a multi-row ``VALUES`` statement of over 50
    parameters on every call, and escaping array parameters element by element cost as much;
    both cost more CPU than the insert. SQLite: one multi-row ``VALUES`` statement (SQLAlchemy's
    "insertmanyvalues", up to 1,000 rows per statement).
    """
    if not rows:
        return []
    statement, parameters = new_rows_statement(connection.dialect, table, rows, keys, column)
    return list(connection.execute(statement, parameters).scalars())


def new_rows_statement(
    dialect: Dialect, table: Table, rows: Sequence[Mapping[str, Any]], keys: Sequence[str], column: str
) -> tuple[Any, Any]:
    """The statement of ``insert_new_rows`` and its parameters, for a connection that is not
    SQLAlchemy's (the server's journal writer, ``drivers.EventLoopConnections``)."""
    if dialect.name == "postgresql":
        statement, document = _json_rows(dialect, table, rows, keys, column)
        return statement, {"rows": document}
    plain = [{name: _plain(value) for name, value in row.items()} for row in rows]
    return _ignoring_returning(table, tuple(keys), column), plain


@functools.cache
def _ignoring_returning(table: Table, keys: tuple[str, ...], column: str) -> Any:
    """SQLite's ``insert_new_rows``, built once per table."""
    return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(keys)).returning(table.c[column])


@dataclass(frozen=True)
class EncodedJson:
    """A JSON column's value together with its JSON text, for a caller that has encoded it anyway
    (the journal, for the event key): PostgreSQL's row document embeds the text instead of
    encoding the value again; SQLite binds the value."""

    value: Any
    text: str


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, EncodedJson) else value


def insert_rows(connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """A plain ``INSERT`` of many rows (all with the same keys), in the order given. PostgreSQL:
    one statement, the rows as one JSON document (as ``insert_new_rows``, for the same reasons),
    instead of a round trip per row. SQLite: ``executemany``, in process (no round trips)."""
    if not rows:
        return
    if connection.dialect.name == "postgresql":
        statement, document = _json_rows(connection.dialect, table, rows, (), None)
        connection.execute(statement, {"rows": document})
    else:
        plain = [{name: _plain(value) for name, value in row.items()} for row in rows]
        connection.execute(table.insert(), plain)


def _json_rows(
    dialect: Dialect,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    column: str | None,
) -> tuple[TextClause, str]:
    """PostgreSQL's ``insert_new_rows`` (without ``keys`` and ``column``: ``insert_rows``): its
    statement, and the rows as one JSON document (an array of arrays; UUIDs as text, datetimes as
    ISO 8601 with their offset)."""
    names = tuple(rows[0])
    processors = _bind_processors(dialect, table, names)
    values = [
        [row[name] if process is None else process(row[name]) for name, process in processors] for row in rows
    ]
    return _json_rows_insert(table, names, tuple(keys), column), orjson.dumps(values).decode()


def _json_fragment(value: Any) -> orjson.Fragment:
    """A JSON column's value as text embedded in the row document as it is. Values not encoded
    by the caller go through ``json``, which writes NaN as such (the database then refuses it,
    as it must) where orjson would write null."""
    return orjson.Fragment(value.text if isinstance(value, EncodedJson) else json.dumps(value))


@functools.cache
def _bind_processors(
    dialect: Dialect, table: Table, names: tuple[str, ...]
) -> list[tuple[str, Callable[[Any], Any] | None]]:
    """Each column's bind processor, ``_json_fragment`` for JSON columns. Not for floating-point
    columns: orjson would write NaN as null instead of failing."""
    json_columns = _json_columns(table)
    floats = [
        name for name in names if name not in json_columns and isinstance(table.c[name].type, sa_types.Float)
    ]
    if floats:
        raise TypeError(f"insert_new_rows cannot send the floating-point columns {floats} on PostgreSQL")
    return [
        (name, _json_fragment if name in json_columns else table.c[name].type.bind_processor(dialect))
        for name in names
    ]


@functools.cache
def _json_columns(table: Table) -> frozenset[str]:
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    return frozenset(c.name for c in table.c if isinstance(c.type.dialect_impl(dialect), sa_types.JSON))


@functools.cache
def _json_rows_insert(
    table: Table, names: tuple[str, ...], keys: tuple[str, ...], column: str | None
) -> TextClause:
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]  # only to name the column types
    values = ", ".join(
        f"CAST(row {'->' if name in _json_columns(table) else '->>'} {i} AS {column_type})"
        for i, name in enumerate(names)
        for column_type in [table.c[name].type.compile(dialect)]
    )
    # jsonb, not json: the document is parsed once, where json's operators re-read a row's text
    # for each column (a quarter to a half of the database's CPU per row, measured).
    return text(
        f"INSERT INTO {table.name} ({', '.join(names)}) SELECT {values}"
        " FROM jsonb_array_elements(CAST(:rows AS jsonb)) WITH ORDINALITY AS u(row, ordinal) ORDER BY ordinal"
        + (f" ON CONFLICT ({', '.join(keys)}) DO NOTHING RETURNING {column}" if column else "")
    )


def try_exclusive_lock(connection: Connection, key: int, *, wait: bool) -> bool:
    """Take a lock, held until the transaction ends, that one transaction at a time can hold.

    PostgreSQL: a transaction-level advisory lock on ``key`` (``wait=False`` gives up at once
    when another transaction holds it). SQLite: the write transaction's ``BEGIN IMMEDIATE``
    already holds the database's one write lock, which excludes every other writer until
    commit, so there is nothing more to take.
    """
    if connection.dialect.name != "postgresql":
        if not connection.get_execution_options().get(WRITE_OPTION, False):
            raise RuntimeError("an exclusive lock on SQLite needs a write transaction (Store.write)")
        return True
    if wait:
        connection.execute(select(func.pg_advisory_xact_lock(key)))
        return True
    taken: bool = connection.execute(select(func.pg_try_advisory_xact_lock(key))).scalar_one()
    return taken


def notify(connection: Connection, channel: str) -> None:
    """PostgreSQL ``NOTIFY channel`` (delivered when the transaction commits); nothing on SQLite."""
    if connection.dialect.name == "postgresql":
        connection.execute(select(func.pg_notify(channel, "")))


def upsert_returning(
    connection: Connection,
    table: Table,
    values: Mapping[str, Any],
    keys: Sequence[str],
    update: Sequence[str],
    returning: Sequence[str],
    constants: Mapping[str, Any] | None = None,
) -> Row[Any]:
    """One ``INSERT … ON CONFLICT (keys) DO UPDATE SET …  RETURNING …`` statement: the row as
    inserted, or as updated: the ``update`` columns take the values given for the insert, the
    ``constants`` columns their fixed values, and the others keep what is stored."""
    statement = _upsert(
        connection.dialect.name,
        table,
        tuple(keys),
        tuple(update),
        tuple(returning),
        tuple(sorted((constants or {}).items())),
        tuple(sorted(values)),
    )
    return connection.execute(statement, dict(values)).one()


@functools.cache
def _upsert(
    dialect_name: str,
    table: Table,
    keys: tuple[str, ...],
    update: tuple[str, ...],
    returning: tuple[str, ...],
    constants: tuple[tuple[str, Any], ...],
    _columns: tuple[str, ...],
) -> Any:
    """Built once per shape: it runs for every dataset and job an event names."""
    statement = _insert(dialect_name, table)
    changes: dict[str, Any] = {column: statement.excluded[column] for column in update}
    changes.update(constants)
    return statement.on_conflict_do_update(index_elements=list(keys), set_=changes).returning(
        *(table.c[c] for c in returning)
    )


def fast_path(
    portable: Callable[Concatenate[Connection, P], T], postgresql: Callable[Concatenate[Connection, P], T]
) -> Callable[Concatenate[Connection, P], T]:
    """The one place a query's PostgreSQL fast path is chosen. A query that PostgreSQL does in one
    round trip (a data-modifying ``WITH`` … ``RETURNING``, a JSON document unpacked into rows) where
    the portable SQL needs several statements is written as a named pair, ``_x_portable`` and
    ``_x_postgresql``, with the same arguments and the same effect; ``x = fast_path(…)`` calls the
    connection's. Both are tested: every store behaviour runs on SQLite and on PostgreSQL."""

    def chosen(connection: Connection, /, *args: P.args, **kwargs: P.kwargs) -> T:
        path = postgresql if connection.dialect.name == "postgresql" else portable
        return path(connection, *args, **kwargs)

    chosen.__doc__ = portable.__doc__
    return chosen


def per_dialect(build: Callable[[Connection], T]) -> Callable[[Connection], T]:
    """Build a statement once per dialect and reuse it (bound values go in as parameters).

    Statements are immutable and memoize their compiled-cache key; building one per call costs more
    Python time than a short query costs the database, on the paths every lot takes.
    """
    built: dict[str, T] = {}

    def get(connection: Connection) -> T:
        name = connection.dialect.name
        found = built.get(name)
        if found is None:
            found = built[name] = build(connection)
        return found

    return get


def in_values(connection: Connection, column: Any, values: Sequence[Any]) -> ColumnElement[bool]:
    """``column IN (values)``; on PostgreSQL ``column = ANY(array)``: one parameter, so a statement
    of a thousand values is compiled and converted once, not once per value (a backfill's sets)."""
    if connection.dialect.name == "postgresql":
        result: ColumnElement[bool] = column == any_(
            bindparam(None, list(values), type_=postgresql.ARRAY(column.type))
        )
        return result
    found: ColumnElement[bool] = column.in_(values)
    return found
