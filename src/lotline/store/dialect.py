"""Every difference between SQLite and PostgreSQL that the store cares about lives here."""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import orjson
from sqlalchemy import Connection, Engine, Row, Table, TextClause, bindparam, event, func, select, text
from sqlalchemy import types as sa_types
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.engine.interfaces import DBAPIConnection, Dialect
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError, StatementError
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
    # A server runs up to ~40 requests at once (the thread pool); a pool smaller than the usual
    # concurrency opens and closes a PostgreSQL connection (a backend process) per request.
    # Liveness is checked by ``install_server_behaviour``, not by a ping at every checkout.
    return {"pool_size": 16, "max_overflow": 32}


def autocommits_single_statements(engine: Engine) -> bool:
    """Whether a one-statement change can skip ``BEGIN``/``COMMIT`` (not on SQLite, whose writes
    must take the write lock with ``BEGIN IMMEDIATE``, see below)."""
    return engine.dialect.name == "postgresql"


def has_stored_functions(engine: Engine) -> bool:
    """Whether the claim functions of migration 0006 exist (PostgreSQL; SQLite has none)."""
    return engine.dialect.name == "postgresql"


#: A pooled connection idle for longer than this is pinged before use (see below): shorter than a
#: server restart takes, so that connections from before a restart are always checked.
PING_AFTER_IDLE_S = 0.1


def install_server_behaviour(engine: Engine) -> None:
    """Ping a pooled connection before use only if it sat idle for more than ``PING_AFTER_IDLE_S``.

    SQLAlchemy's ``pool_pre_ping`` pings at every checkout: a round trip per transaction, a fifth
    of a worker's cost per lot on PostgreSQL. A busy process reuses its connections within
    milliseconds, and a connection used that recently is alive unless its backend was killed in
    between (then the first statement fails, SQLAlchemy sees the disconnect and discards the
    pool's connections, and a retry gets new ones — as for a transaction in flight at an outage).
    A connection idle for longer, which every connection is after a server restart, is pinged and
    replaced, without an error, if it is dead.
    """

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
        record.info["lotline_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry, _proxy: Any) -> None:
        if _needs_ping(record.info.get("lotline_idle_since")) and not _alive(engine, dbapi_connection):
            raise DisconnectionError("the pooled connection is gone; the pool opens a new one")


def _needs_ping(idle_since: float | None) -> bool:
    """Whether a connection last used at ``idle_since`` (None: new) is checked before its next use."""
    return idle_since is not None and time.monotonic() - idle_since > PING_AFTER_IDLE_S


def _alive(engine: Engine, dbapi_connection: Any) -> bool:
    try:
        return bool(engine.dialect.do_ping(dbapi_connection))
    except engine.dialect.loaded_dbapi.Error:
        return False


class DriverConnections:
    """Connections of the PostgreSQL driver itself (psycopg), one per thread, in autocommit and
    outside SQLAlchemy: for the two calls every worker makes on every lot
    (``store/queries/claim_functions.py``). Measured on one worker, SQLAlchemy's pool checkout,
    isolation-level switch and check-in around each call cost as much client CPU as the call.

    Liveness is kept as the pool keeps it (``install_server_behaviour``): a connection idle for
    longer than ``PING_AFTER_IDLE_S`` is pinged first and silently replaced if dead; one that an
    error shows lost is closed, the error is raised as SQLAlchemy's (``DBAPIError``, with
    ``connection_invalidated``), and the next call connects anew.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._dsn = _driver_dsn(engine)
        self._local = threading.local()
        self._opened: list[Any] = []
        self._lock = threading.Lock()

    def fetch_one(self, statement: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """Run ``statement`` (a transaction of its own) and return its first row, if any."""
        import psycopg

        connection = None
        try:
            connection = self._connection()
            row: tuple[Any, ...] | None = connection.execute(statement, params).fetchone()
            return row
        except psycopg.Error as error:
            failure, lost = _driver_failure(self._engine, statement, params, error, connection)
            if lost and connection is not None:
                connection.close()
            raise failure from error
        finally:
            self._local.used_at = time.monotonic()

    def _connection(self) -> Any:
        import psycopg

        held = getattr(self._local, "connection", None)
        if (
            held is not None
            and not held.closed
            and _needs_ping(self._local.used_at)
            and not _alive(self._engine, held)
        ):
            held.close()
        if held is None or held.closed:
            held = psycopg.connect(self._dsn, autocommit=True)
            with self._lock:
                self._opened = [c for c in self._opened if not c.closed] + [held]
            self._local.connection = held
        return held

    def close(self) -> None:
        """Close every thread's connection (``Store.dispose``); a later call connects anew."""
        with self._lock:
            opened, self._opened = self._opened, []
        for connection in opened:
            connection.close()


class AsyncDriverConnections:
    """asyncpg connections to PostgreSQL for code that runs in an event loop: the server's journal
    writer (``insert_new_rows_async``), which then needs no thread to wait on the database. With
    one, a group of events was journaled in about 0.02 ms after it was handed over, against
    0.3-0.5 ms for a thread to win the GIL back from the busy loop. asyncpg rather than psycopg's
    asyncio connections: 48-62 against 80-94 us of the server's CPU per 4-event journal statement
    (docs/benchmarks.md), on the path that every accepted event takes.

    Statements use asyncpg's ``$1`` parameters (``compiled_for_asyncpg``). Use from one event
    loop. Connections are kept while idle and checked out one per statement, so as many
    statements run at once as callers await. Liveness and errors work as in
    ``DriverConnections``: an idle connection is pinged, a lost one is dropped, and every failure
    is raised as SQLAlchemy's. A statement cancelled while it runs leaves its connection to the
    garbage collector (the journal writer never cancels one)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._dsn = _driver_dsn(engine)
        self._idle: list[tuple[Any, float]] = []  # (connection, last used), most recent last

    @property
    def dialect(self) -> Dialect:
        """The store's dialect (it types the values of a row document)."""
        return self._engine.dialect

    async def fetch_all(self, statement: str, args: Sequence[Any]) -> list[Sequence[Any]]:
        """Run ``statement`` (a transaction of its own) and return its rows."""
        connection = None
        try:
            connection = await self._checkout()
            rows: list[Sequence[Any]] = await connection.fetch(statement, *args)
        except _asyncpg_errors() as error:
            failure, lost = _asyncpg_failure(statement, args, error, connection)
            if connection is not None:
                if lost:
                    connection.terminate()
                else:
                    self._idle.append((connection, time.monotonic()))
            raise failure from error
        self._idle.append((connection, time.monotonic()))
        return rows

    async def _checkout(self) -> Any:
        import asyncpg

        while self._idle:
            connection, used_at = self._idle.pop()
            if connection.is_closed():
                continue
            if _needs_ping(used_at):
                try:
                    await connection.fetchval("SELECT 1")
                except _asyncpg_errors():
                    connection.terminate()
                    continue
            return connection
        return await asyncpg.connect(self._dsn)

    async def close(self) -> None:
        """Close the idle connections (all of them, once no statement is running)."""
        idle, self._idle = self._idle, []
        for connection, _ in idle:
            await connection.close()


def _asyncpg_errors() -> tuple[type[Exception], ...]:
    """What asyncpg raises when the database refuses a statement or the connection fails (not
    for mistakes in the calling code)."""
    import asyncpg

    return (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)


def _asyncpg_failure(
    statement: str, args: Sequence[Any], error: Exception, connection: Any
) -> tuple[StatementError, bool]:
    """An asyncpg error as SQLAlchemy's (``DataError`` for a refused value, and so on, by the error's
    class name as for any driver), and whether the connection is lost. No connection at all (the
    server is down or restarting) counts as lost: ``OperationalError``."""
    import asyncpg

    lost = (
        connection is None
        or connection.is_closed()
        or isinstance(error, (OSError, asyncpg.PostgresConnectionError))
    )
    if lost:
        return OperationalError(statement, args, error, connection_invalidated=True), True
    return DBAPIError.instance(statement, args, error, Exception), False


def _driver_failure(
    engine: Engine, statement: str, params: Any, error: Exception, connection: Any
) -> tuple[StatementError, bool]:
    """A psycopg error as SQLAlchemy's (what callers of the store handle), and whether the
    connection is lost. No connection at all (the server is down or restarting) counts as lost."""
    import psycopg

    lost = (
        connection is None
        or connection.broken
        or engine.dialect.is_disconnect(cast(Any, error), connection, None)
    )
    failure = DBAPIError.instance(
        statement, params, error, psycopg.Error, connection_invalidated=lost, dialect=engine.dialect
    )
    return failure, lost


def _driver_dsn(engine: Engine) -> str:
    """The engine's database as a libpq connection string, for connections made without it."""
    return str(engine.url.set(drivername="postgresql").render_as_string(hide_password=False))


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
    connection.execute(_ignoring(connection.dialect.name, table, tuple(keys)), list(rows))


@functools.cache
def _ignoring(dialect_name: str, table: Table, keys: tuple[str, ...]) -> Any:
    """Built once per table: the statement runs for every event."""
    return _insert(dialect_name, table).on_conflict_do_nothing(index_elements=list(keys))


def increment_returning(connection: Connection, table: Table, key: str, key_value: Any, column: str) -> int:
    """A counter row, incremented (or created at 1) by one ``INSERT … ON CONFLICT DO UPDATE …
    RETURNING``; the row stays locked until commit."""
    statement = _increment(connection.dialect.name, table, key, column)
    value: int = connection.execute(statement, {"p_key": key_value}).scalar_one()
    return value


@functools.cache
def _increment(dialect_name: str, table: Table, key: str, column: str) -> Any:
    """Built once per table: it runs for every version."""
    new = _insert(dialect_name, table).values({key: bindparam("p_key"), column: 1})
    return new.on_conflict_do_update(index_elements=[key], set_={column: table.c[column] + 1}).returning(
        table.c[column]
    )


def locks_rows(connection: Connection) -> bool:
    """Whether ``SELECT … FOR UPDATE`` means anything here (SQLite locks the whole file instead)."""
    return connection.dialect.name == "postgresql"


def single_writer(engine: Engine) -> bool:
    """Whether writers queue for one database-wide lock (SQLite): then an idle worker should look for
    work in a read transaction first, instead of taking the write lock only to find nothing."""
    return engine.dialect.name == "sqlite"


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
    if connection.dialect.name == "postgresql":
        statement, document = _json_rows(connection.dialect, table, rows, keys, column)
        return list(connection.execute(statement, {"rows": document}).scalars())
    insert = sqlite.insert(table).on_conflict_do_nothing(index_elements=list(keys)).returning(table.c[column])
    plain = [{name: _plain(value) for name, value in row.items()} for row in rows]
    return list(connection.execute(insert, plain).scalars())


async def insert_new_rows_async(
    driver: AsyncDriverConnections,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    column: str,
) -> list[Any]:
    """``insert_new_rows`` from an event loop (PostgreSQL), as a transaction of its own."""
    if not rows:
        return []
    statement, document = _json_rows(driver.dialect, table, rows, keys, column)
    return [row[0] for row in await driver.fetch_all(compiled_for_asyncpg(statement), (document,))]


@dataclass(frozen=True)
class EncodedJson:
    """A JSON column's value together with its JSON text, for a caller that has encoded it anyway
    (the journal, for the event key): PostgreSQL's row document embeds the text instead of
    encoding the value again; SQLite binds the value."""

    value: Any
    text: str


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, EncodedJson) else value


def _json_rows(
    dialect: Dialect, table: Table, rows: Sequence[Mapping[str, Any]], keys: Sequence[str], column: str
) -> tuple[TextClause, str]:
    """PostgreSQL's ``insert_new_rows``: its statement, and the rows as one JSON document (an
    array of arrays; UUIDs as text, datetimes as ISO 8601 with their offset)."""
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
def compiled_for_asyncpg(statement: TextClause) -> str:
    """The statement's text as asyncpg takes it (``$1``…, in the order of its bind parameters)."""
    from sqlalchemy.dialects.postgresql import asyncpg

    return str(statement.compile(dialect=asyncpg.dialect()))  # type: ignore[no-untyped-call]


@functools.cache
def _json_columns(table: Table) -> frozenset[str]:
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    return frozenset(c.name for c in table.c if isinstance(c.type.dialect_impl(dialect), sa_types.JSON))


@functools.cache
def _json_rows_insert(table: Table, names: tuple[str, ...], keys: tuple[str, ...], column: str) -> TextClause:
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
        f" ON CONFLICT ({', '.join(keys)}) DO NOTHING RETURNING {column}"
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


class Listener:
    """PostgreSQL ``LISTEN channel`` on a connection of its own; :meth:`wait` blocks until a
    notification arrives or the timeout passes. On SQLite there is nothing to listen to and
    :meth:`wait` only sleeps."""

    def __init__(self, engine: Engine, channel: str) -> None:
        self._connection: Any = None
        if engine.dialect.name == "postgresql":
            import psycopg
            import psycopg.sql

            self._connection = psycopg.connect(_driver_dsn(engine), autocommit=True)
            self._connection.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel)))

    def wait(self, timeout: float) -> bool:
        """True if at least one notification arrived within ``timeout`` seconds."""
        if self._connection is None:
            time.sleep(timeout)
            return False
        received = False
        for _ in self._connection.notifies(timeout=timeout, stop_after=1):
            received = True
        return received

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


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
