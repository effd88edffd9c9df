"""Opening a store: one engine per database URL, and the two kinds of transaction lotline uses."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Connection, create_engine

from lotline.domain.errors import DatabaseUnavailable, LotlineError, NoDatabase
from lotline.domain.secrets import masked_url
from lotline.store import errors, migrate
from lotline.store.drivers import (
    WRITE_OPTION,
    Capabilities,
    DirectConnections,
    EventLoopConnections,
    Listener,
    driver_for,
    parse_url,
)

__all__ = [
    "EventLoopConnections",
    "Listener",
    "SchemaNotCurrent",
    "Store",
    "open_store",
    "shown_url",
    "sqlite_file",
]

T = TypeVar("T")
#: SQLSTATEs of a transaction PostgreSQL chose as a victim (a deadlock, a serialization failure):
#: it changed nothing, and the same transaction again normally commits.
VICTIM_SQLSTATES = frozenset({"40P01", "40001"})
#: How often :meth:`Store.transact` tries a transaction that keeps being chosen as a victim.
VICTIM_TRIES = 5


class SchemaNotCurrent(LotlineError):
    """The database exists but its schema is older than this lotline (run ``lotline db upgrade``)."""

    code = "schema_not_current"


class Store:
    """A database lotline keeps its records in. Every state change runs inside :meth:`write`.

    Its driver (``drivers.py``) is chosen once from the URL; what above the store depends on the
    driver is asked here: :attr:`capabilities`, :attr:`direct_connections`, :meth:`listen`.
    """

    def __init__(self, url: str) -> None:
        self._driver = driver_for(url)
        self.url = self._driver.url
        self.engine = create_engine(self.url, **self._driver.engine_options())
        self._driver.prepare(self.engine)
        errors.install(self.engine)
        self.capabilities: Capabilities = self._driver.capabilities
        #: The driver's own connections for the claim functions (PostgreSQL only, see there).
        self.direct_connections: DirectConnections | None = self._driver.direct_connections(self.engine)

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    def event_loop_connections(self) -> EventLoopConnections | None:
        """New connections for code in one event loop (PostgreSQL: asyncpg), or None where the
        driver has none (SQLite). The caller closes them."""
        return self._driver.event_loop_connections(self.engine)

    def listen(self, channel: str) -> Listener:
        """A wake-up for ``NOTIFY channel`` on a connection of its own (on SQLite, which has no
        notifications, one that only sleeps). The caller closes it."""
        return self._driver.listener(self.engine, channel)

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One transaction that may write; on SQLite it holds the write lock from its first statement."""
        with errors.lost_transaction(), self.engine.connect() as connection:
            connection.execution_options(**{WRITE_OPTION: True})
            with connection.begin():
                yield connection

    def transact(self, work: Callable[[Connection], T]) -> T:
        """``work`` in one :meth:`write`, tried again (up to ``VICTIM_TRIES`` times, after a short
        random pause) when the database ends it as a deadlock's or serialization's victim — a
        multi-row change such as an invalidation's cascade locks rows in an order it discovers as
        it goes, so two of them may each wait on the other; the victim changed nothing. ``work``
        must have no effect outside the transaction. Any other failure is raised at once."""
        for attempt in range(1, VICTIM_TRIES + 1):
            try:
                with self.write() as connection:
                    return work(connection)
            except DatabaseUnavailable as error:
                if error.sqlstate not in VICTIM_SQLSTATES or attempt == VICTIM_TRIES:
                    raise
                time.sleep(random.uniform(0.01, 0.05 * attempt))
        raise AssertionError("unreachable")

    @contextmanager
    def rehearsal(self) -> Iterator[Connection]:
        """A :meth:`write` that is always rolled back: what a change would do, by the very code that
        makes it (a backfill's dry run counts its cascade so), leaving nothing behind."""
        with errors.lost_transaction(), self.engine.connect() as connection:
            connection.execution_options(**{WRITE_OPTION: True})
            transaction = connection.begin()
            try:
                yield connection
            finally:
                transaction.rollback()

    @contextmanager
    def one_statement(self) -> Iterator[Connection]:
        """For a change made by exactly one statement, which is atomic by itself: on PostgreSQL it
        runs in autocommit (no ``BEGIN``/``COMMIT`` round trips); elsewhere it is a :meth:`write`."""
        if not self.capabilities.autocommits_single_statements:
            with self.write() as connection:
                yield connection
            return
        with errors.lost_transaction(), self.engine.connect() as connection:
            yield connection.execution_options(isolation_level="AUTOCOMMIT")

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """One read-only transaction: a consistent snapshot that never blocks writers."""
        with errors.lost_transaction(), self.engine.connect() as connection, connection.begin():
            yield connection

    def upgrade(self) -> None:
        with self.write() as connection:
            migrate.upgrade(connection)

    def schema_revision(self) -> str | None:
        with self.read() as connection:
            return migrate.current_revision(connection)

    def dispose(self) -> None:
        if self.direct_connections is not None:
            self.direct_connections.close()
        self.engine.dispose()


def shown_url(url: str) -> str:
    """The URL as lotline may print it: its password masked, in the userinfo or the query (a URL it
    cannot parse, as it is but for the same masks)."""
    try:
        rendered = parse_url(url).render_as_string(hide_password=False)
    except LotlineError:
        rendered = url
    return masked_url(rendered, endpoint=False)


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None: another database, or SQLite in memory)."""
    parsed = parse_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def open_store(url: str, *, create: bool = True) -> Store:
    """Open a store ready for use.

    SQLite databases are created and migrated on first use (the embedded default needs no set-up
    step) unless ``create`` is False, as for commands that only read: a missing file is then
    ``NoDatabase``. A server database must be migrated explicitly with ``lotline db upgrade``,
    because schema changes on a shared database are an operator's decision.
    """
    file = sqlite_file(url)
    if not create and file is not None and not file.exists():
        raise NoDatabase(shown_url(url))
    store = Store(url)
    if store.backend == "sqlite":
        if store.schema_revision() != migrate.head_revision():  # a current file needs no write lock
            store.upgrade()
        return store
    revision = store.schema_revision()
    if revision != migrate.head_revision():
        store.dispose()
        raise SchemaNotCurrent(
            f"database {shown_url(store.url)} is at schema revision {revision or 'none'}, "
            f"this lotline needs {migrate.head_revision()}: run `lotline db upgrade`"
        )
    return store
