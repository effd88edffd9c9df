"""The database drivers behind one port: what lotline needs of a driver beyond SQLAlchemy's SQL.

``Driver`` is the port; ``SqliteDriver`` (the standard library's sqlite3) and ``PsycopgDriver``
(psycopg 3, for PostgreSQL) are its adapters, chosen once from the URL by ``driver_for``. A
driver says how its engine is made and prepared, what the database can do (``Capabilities``), and
gives the connections lotline opens outside SQLAlchemy's pool: ``DirectConnections`` for the
claim functions and a ``Listener`` for ``NOTIFY``. Every connection follows one liveness policy
(``IDLE_PING_SECONDS``) and every failure one translation (``store/errors.py``); the server's
journal writer has ``EventLoopConnections`` (asyncpg) of the same kind. SQL that differs
between the databases is in ``dialect.py``; nothing above the store imports this module (an
import-linter contract): services reach drivers through ``Store`` only.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Engine, TextClause, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection, Dialect
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.pool import ConnectionPoolEntry

from lotline.domain.errors import InvalidInput, ValueRefused
from lotline.domain.secrets import masked_url
from lotline.store.errors import translate

#: Execution option that marks a connection whose transaction will write.
WRITE_OPTION = "lotline_write"
SQLITE_BUSY_TIMEOUT_S = 60
#: The liveness policy of every connection: one idle for longer than this is pinged before use and
#: replaced, without an error, if it is dead; one used more recently is trusted (a ping per use was
#: a fifth of a worker's cost per lot). Shorter than a server restart takes, so that connections
#: from before a restart are always checked. A connection that dies in use fails that statement
#: (``DatabaseUnavailable``, connection lost) and the next one gets a new connection.
IDLE_PING_SECONDS = 0.1


def needs_ping(idle_since: float | None) -> bool:
    """Whether a connection last used at ``idle_since`` (monotonic; None: new) is pinged first."""
    return idle_since is not None and time.monotonic() - idle_since > IDLE_PING_SECONDS


@dataclass(frozen=True)
class Capabilities:
    """What the database can do, as far as lotline's choices depend on it."""

    #: A one-statement change may skip ``BEGIN``/``COMMIT`` (not on SQLite, whose writers must
    #: take the write lock with ``BEGIN IMMEDIATE``).
    autocommits_single_statements: bool
    #: The claim functions of migrations 0006/0007 exist (PostgreSQL).
    stored_functions: bool
    #: Writers queue for one database-wide lock (SQLite): an idle worker should look for work in a
    #: read transaction first, instead of taking the write lock only to find nothing.
    single_writer: bool
    #: Another process's commit can wake a waiting loop (``LISTEN``/``NOTIFY``); without it,
    #: ``Store.listen`` only sleeps and loops find new work by polling.
    notifies: bool


class Driver:
    """The port: one subclass per driver."""

    capabilities: Capabilities

    def __init__(self, url: str) -> None:
        self.url = url

    def engine_options(self) -> dict[str, Any]:
        return {}

    def prepare(self, engine: Engine) -> None:
        """Per-connection settings and the liveness policy, installed on a new engine."""

    def direct_connections(self, engine: Engine) -> DirectConnections | None:
        """Connections outside SQLAlchemy for the claim functions (None where there are none)."""
        return None

    def event_loop_connections(self, engine: Engine) -> EventLoopConnections | None:
        """Connections for code running in an event loop (None where there are none)."""
        return None

    def listener(self, engine: Engine, channel: str) -> Listener:
        """A wake-up for ``NOTIFY channel``; where the database has none, one that only sleeps."""
        return Listener(None, engine)


class SqliteDriver(Driver):
    """The embedded default: WAL, enforced foreign keys, ``BEGIN IMMEDIATE`` for writers.

    pysqlite's own transaction handling is switched off (``isolation_level = None``) so that
    SQLAlchemy's ``begin`` event decides how each transaction starts: a writer takes the write
    lock up front instead of failing with "database is locked" when it upgrades a read lock. A
    file needs no liveness check.
    """

    capabilities = Capabilities(
        autocommits_single_statements=False, stored_functions=False, single_writer=True, notifies=False
    )

    def engine_options(self) -> dict[str, Any]:
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}, "json_serializer": _json_without_nul}

    def prepare(self, engine: Engine) -> None:
        @event.listens_for(engine, "before_cursor_execute")
        def _refuse_nul(
            _connection: Connection,
            _cursor: Any,
            _statement: str,
            parameters: Any,
            _context: Any,
            executemany: bool,
        ) -> None:
            # One row (a tuple or a dict), or several (executemany; SQLAlchemy's batched inserts
            # may pass one flat tuple even then).
            for item in parameters.values() if isinstance(parameters, Mapping) else parameters:
                values = item.values() if isinstance(item, Mapping) else item
                if isinstance(values, str):
                    values = (values,)
                elif not isinstance(values, list | tuple):
                    continue
                if any(isinstance(value, str) and "\x00" in value for value in values):
                    raise ValueRefused(NUL_REFUSED)

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


#: What PostgreSQL says of a NUL character in text or JSON, said on SQLite too (which would store it).
NUL_REFUSED = "a value was rejected by the database: text cannot contain NUL (0x00) characters"


def _json_without_nul(value: Any) -> str:
    """SQLite's JSON serializer: ``json.dumps``, refusing a NUL character in a string or key (escaped
    as ``\\u0000`` in the text, which is looked at first: strings are walked only when it is there)."""
    text = json.dumps(value)
    if "\\u0000" in text and _has_nul(value):
        raise ValueRefused(NUL_REFUSED)
    return text


def _has_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


class PsycopgDriver(Driver):
    """PostgreSQL through psycopg 3, for SQLAlchemy's pool and for lotline's own connections."""

    capabilities = Capabilities(
        autocommits_single_statements=True, stored_functions=True, single_writer=False, notifies=True
    )

    def __init__(self, url: str) -> None:
        super().__init__(url)
        #: The same database as a libpq connection string, for connections made without SQLAlchemy.
        self.dsn = str(make_url(url).set(drivername="postgresql").render_as_string(hide_password=False))

    def engine_options(self) -> dict[str, Any]:
        # A server runs up to ~40 requests at once (the thread pool); a pool smaller than the usual
        # concurrency opens and closes a PostgreSQL connection (a backend process) per request.
        return {"pool_size": 16, "max_overflow": 32}

    def prepare(self, engine: Engine) -> None:
        """The liveness policy on the pool, instead of SQLAlchemy's ``pool_pre_ping`` (a round
        trip at every checkout)."""

        @event.listens_for(engine, "checkin")
        def _on_checkin(_dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
            record.info["lotline_idle_since"] = time.monotonic()

        @event.listens_for(engine, "checkout")
        def _on_checkout(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry, _proxy: Any) -> None:
            if needs_ping(record.info.get("lotline_idle_since")) and not alive(engine, dbapi_connection):
                raise DisconnectionError("the pooled connection is gone; the pool opens a new one")

    def direct_connections(self, engine: Engine) -> DirectConnections:
        return DirectConnections(engine, self.dsn)

    def event_loop_connections(self, engine: Engine) -> EventLoopConnections:
        return EventLoopConnections(engine, self.dsn)

    def listener(self, engine: Engine, channel: str) -> Listener:
        import psycopg
        import psycopg.sql

        connection = None
        try:
            connection = psycopg.connect(self.dsn, autocommit=True)
            connection.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel)))
        except psycopg.Error as error:
            if connection is not None:
                connection.close()
            raise _failure(engine, "LISTEN", (), error, connection)[0] from error
        return Listener(connection, engine)


#: The URLs lotline can use, for the error that refuses any other.
URL_FORMS = "sqlite:///path/to/lotline.db or postgresql://user@host:5432/database"


def parse_url(url: str) -> URL:
    """A database URL lotline can use (SQLite, or PostgreSQL through psycopg 3), else InvalidInput
    naming it: a file name or another database is one line, not SQLAlchemy's traceback."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise InvalidInput(
            f"database URL {masked_url(url, endpoint=False)!r} is not a URL; use {URL_FORMS}."
        ) from None
    backend = parsed.drivername.partition("+")[0]
    if parsed.drivername in ("sqlite", "sqlite+pysqlite"):
        return parsed
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg")
    shown = masked_url(parsed.render_as_string(hide_password=False), endpoint=False)
    raise InvalidInput(f"database URL {shown} is not one lotline can use; use {URL_FORMS}.")


def driver_for(url: str) -> Driver:
    """The driver of a database URL; ``postgresql://…`` and ``postgres://…`` mean psycopg 3."""
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        return SqliteDriver(url)
    return PsycopgDriver(parsed.render_as_string(hide_password=False))


def alive(engine: Engine, dbapi_connection: Any) -> bool:
    """Whether a driver connection answers a ping."""
    try:
        return bool(engine.dialect.do_ping(dbapi_connection))
    except engine.dialect.loaded_dbapi.Error:
        return False


class DirectConnections:
    """Connections of the driver itself (psycopg), one per thread, in autocommit and outside
    SQLAlchemy: for the two calls every worker makes on every lot
    (``store/queries/claim_functions.py``). Measured on one worker, SQLAlchemy's pool checkout,
    isolation-level switch and check-in around each call cost as much client CPU as the call.
    Liveness and errors as everywhere (module docstring); closed by ``Store.dispose``.
    """

    def __init__(self, engine: Engine, dsn: str) -> None:
        self._engine = engine
        self._dsn = dsn
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
            failure, lost = _failure(self._engine, statement, params, error, connection)
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
            and needs_ping(self._local.used_at)
            and not alive(self._engine, held)
        ):
            held.close()
        if held is None or held.closed:
            held = psycopg.connect(self._dsn, autocommit=True)
            with self._lock:
                self._opened = [c for c in self._opened if not c.closed] + [held]
            self._local.connection = held
        return held

    def close(self) -> None:
        """Close every thread's connection; a later call connects anew."""
        with self._lock:
            opened, self._opened = self._opened, []
        for connection in opened:
            connection.close()


def _failure(
    engine: Engine, statement: str, params: Any, error: Exception, connection: Any
) -> tuple[Exception, bool]:
    """A psycopg error as lotline's (classified as SQLAlchemy would, then ``errors.translate``),
    and whether the connection is lost. No connection at all (the server is down or restarting)
    counts as lost."""
    import psycopg

    lost = (
        connection is None
        or connection.broken
        or engine.dialect.is_disconnect(cast(Any, error), connection, None)
    )
    wrapped = DBAPIError.instance(
        statement, params, error, psycopg.Error, connection_invalidated=lost, dialect=engine.dialect
    )
    return translate(cast(DBAPIError, wrapped)), lost


class EventLoopConnections:
    """asyncpg connections for code that runs in an event loop: the server's journal writer on
    PostgreSQL, which then needs no thread to wait on the database. A thread had to win the GIL
    back from the busy event loop after every statement: with it, the server accepted a third of
    the single events per second (docs/benchmarks.md, "bench.ingest"). asyncpg rather than
    psycopg's asyncio connections: 48-62 against 80-94 µs of the server's CPU per 4-event journal
    statement, on the path that every accepted event takes.

    Use from one event loop. Connections are kept while idle and checked out one per statement,
    so as many statements run at once as callers await. Liveness and errors as everywhere (module
    docstring). A statement cancelled while it runs leaves its connection to the garbage
    collector (the journal writer never cancels one).
    """

    def __init__(self, engine: Engine, dsn: str) -> None:
        self._engine = engine
        self._dsn = dsn
        self._idle: list[tuple[Any, float]] = []  # (connection, last used), most recent last

    @property
    def dialect(self) -> Dialect:
        """The store's dialect: statements are built for it (then compiled for asyncpg)."""
        return self._engine.dialect

    async def fetch_column(self, statement: TextClause, parameters: Mapping[str, Any]) -> list[Any]:
        """Run ``statement`` (a transaction of its own) and return the first column of its rows."""
        text, names = _for_asyncpg(statement)
        args = [parameters[name] for name in names]
        connection = None
        try:
            connection = await self._checkout()
            rows = await connection.fetch(text, *args)
        except _asyncpg_errors() as error:
            failure, lost = _asyncpg_failure(self._engine, text, args, error, connection)
            if connection is not None:
                if lost:
                    connection.terminate()
                else:
                    self._idle.append((connection, time.monotonic()))
            raise failure from error
        self._idle.append((connection, time.monotonic()))
        return [row[0] for row in rows]

    async def _checkout(self) -> Any:
        import asyncpg

        while self._idle:
            connection, used_at = self._idle.pop()
            if connection.is_closed():
                continue
            if needs_ping(used_at):
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


@functools.cache
def _for_asyncpg(statement: TextClause) -> tuple[str, tuple[str, ...]]:
    """The statement's text as asyncpg takes it (``$1``…) and its parameters' names in that order."""
    from sqlalchemy.dialects.postgresql import asyncpg

    compiled = statement.compile(dialect=asyncpg.dialect())  # type: ignore[no-untyped-call]
    return str(compiled), tuple(compiled.positiontup or ())


def _asyncpg_errors() -> tuple[type[Exception], ...]:
    """What asyncpg raises when the database refuses a statement or the connection fails (not
    for mistakes in the calling code)."""
    import asyncpg

    return (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)


def _asyncpg_failure(
    engine: Engine, statement: str, args: Sequence[Any], error: Exception, connection: Any
) -> tuple[Exception, bool]:
    """An asyncpg error as lotline's (classified by the error's class name, as SQLAlchemy does for
    any driver, then ``errors.translate``), and whether the connection is lost. No connection at
    all (the server is down or restarting) counts as lost."""
    import asyncpg

    lost = (
        connection is None
        or connection.is_closed()
        or isinstance(error, (OSError, asyncpg.PostgresConnectionError))
    )
    if lost:
        wrapped: DBAPIError = OperationalError(statement, args, error, connection_invalidated=True)
    else:
        wrapped = cast(DBAPIError, DBAPIError.instance(statement, args, error, Exception))
    return translate(wrapped), lost


class Listener:
    """``LISTEN`` on a connection of its own (PostgreSQL); :meth:`wait` blocks until a notification
    arrives or the timeout passes. Without a connection (SQLite) :meth:`wait` only sleeps."""

    def __init__(self, connection: Any, engine: Engine) -> None:
        self._connection = connection
        self._engine = engine

    def wait(self, timeout: float) -> bool:
        """True if at least one notification arrived within ``timeout`` seconds; a lost connection
        is ``DatabaseUnavailable``, as everywhere (the caller listens anew)."""
        if self._connection is None:
            time.sleep(timeout)
            return False
        import psycopg

        received = False
        try:
            for _ in self._connection.notifies(timeout=timeout, stop_after=1):
                received = True
        except psycopg.Error as error:
            raise _failure(self._engine, "LISTEN", (), error, self._connection)[0] from error
        return received

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
