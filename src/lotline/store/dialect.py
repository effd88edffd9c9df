"""Every difference between SQLite and PostgreSQL that the store cares about lives here."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Table, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry

T = TypeVar("T")

#: Execution option that marks a connection whose transaction will write.
WRITE_OPTION = "lotline_write"
SQLITE_BUSY_TIMEOUT_S = 60


def normalize_url(url: str) -> str:
    """Let users write ``postgresql://…``; lotline talks to PostgreSQL through psycopg 3."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def engine_options(url: str) -> dict[str, Any]:
    if make_url(url).get_backend_name() == "sqlite":
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    return {"pool_pre_ping": True}


def install_sqlite_behaviour(engine: Engine) -> None:
    """WAL, enforced foreign keys, and ``BEGIN IMMEDIATE`` for writing transactions.

    pysqlite's own transaction handling is switched off (``isolation_level = None``) so that
    SQLAlchemy's ``begin`` event decides how each transaction starts: a writer takes the write
    lock up front instead of failing with "database is locked" when it upgrades a read lock.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        writes = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")


def upsert_insert(connection: Connection, table: Table) -> Any:
    """An ``INSERT`` that supports ``on_conflict_do_update(…, where=…)`` in the connection's dialect.

    Both dialects take the same arguments; conditional upserts are how a claim takes a lot
    atomically (a row that exists is updated only if its status still allows it).
    """
    dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    return dialect_insert(table)


def insert_ignoring_conflicts(
    connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]], keys: Sequence[str]
) -> None:
    """``INSERT … ON CONFLICT (keys) DO NOTHING`` in the connection's dialect."""
    if rows:
        connection.execute(_insert_ignoring(connection.dialect.name, table, tuple(keys)), list(rows))


@functools.cache
def _insert_ignoring(dialect_name: str, table: Table, keys: tuple[str, ...]) -> Any:
    dialect_insert = postgresql.insert if dialect_name == "postgresql" else sqlite.insert
    return dialect_insert(table).on_conflict_do_nothing(index_elements=list(keys))


def locks_rows(connection: Connection) -> bool:
    """Whether ``SELECT … FOR UPDATE`` means anything here (SQLite locks the whole file instead)."""
    return connection.dialect.name == "postgresql"


def single_writer(engine: Engine) -> bool:
    """Whether writers queue for one database-wide lock (SQLite): then an idle worker should look for
    work in a read transaction first, instead of taking the write lock only to find nothing."""
    return engine.dialect.name == "sqlite"


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
