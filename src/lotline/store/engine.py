"""Opening a store: one engine per database URL, and the two kinds of transaction lotline uses."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, create_engine
from sqlalchemy.engine import make_url

from lotline.store import dialect, migrate


class SchemaNotCurrent(RuntimeError):
    """The database exists but its schema is older than this lotline (run ``lotline db upgrade``)."""


class Store:
    """A database lotline keeps its records in. Every state change runs inside :meth:`write`."""

    def __init__(self, url: str) -> None:
        self.url = dialect.normalize_url(url)
        self.engine = create_engine(self.url, **dialect.engine_options(self.url))
        #: The driver's own connections for the claim functions (PostgreSQL only, see there).
        self.driver_connections: dialect.DriverConnections | None = None
        if self.engine.dialect.name == "sqlite":
            dialect.install_sqlite_behaviour(self.engine)
        else:
            dialect.install_server_behaviour(self.engine)
            self.driver_connections = dialect.DriverConnections(self.engine)

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One transaction that may write; on SQLite it holds the write lock from its first statement."""
        with self.engine.connect() as connection:
            connection.execution_options(**{dialect.WRITE_OPTION: True})
            with connection.begin():
                yield connection

    @contextmanager
    def one_statement(self) -> Iterator[Connection]:
        """For a change made by exactly one statement, which is atomic by itself: on PostgreSQL it
        runs in autocommit (no ``BEGIN``/``COMMIT`` round trips); elsewhere it is a :meth:`write`."""
        if not dialect.autocommits_single_statements(self.engine):
            with self.write() as connection:
                yield connection
            return
        with self.engine.connect() as connection:
            yield connection.execution_options(isolation_level="AUTOCOMMIT")

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """One read-only transaction: a consistent snapshot that never blocks writers."""
        with self.engine.connect() as connection, connection.begin():
            yield connection

    def upgrade(self) -> None:
        with self.write() as connection:
            migrate.upgrade(connection)

    def schema_revision(self) -> str | None:
        with self.read() as connection:
            return migrate.current_revision(connection)

    def async_driver_connections(self) -> dialect.AsyncDriverConnections | None:
        """New driver connections for one event loop (PostgreSQL only; see there), or None. The
        caller closes them."""
        return dialect.AsyncDriverConnections(self.engine) if self.driver_connections is not None else None

    def dispose(self) -> None:
        if self.driver_connections is not None:
            self.driver_connections.close()
        self.engine.dispose()


def open_store(url: str) -> Store:
    """Open a store ready for use.

    SQLite databases are created and migrated on first use (the embedded default needs no set-up
    step); a server database must be migrated explicitly with ``lotline db upgrade``, because
    schema changes on a shared database are an operator's decision.
    """
    store = Store(url)
    if store.backend == "sqlite":
        store.upgrade()
        return store
    revision = store.schema_revision()
    if revision != migrate.head_revision():
        store.dispose()
        shown = make_url(store.url).render_as_string(hide_password=True)
        raise SchemaNotCurrent(
            f"database {shown} is at schema revision {revision or 'none'}, "
            f"this lotline needs {migrate.head_revision()}: run `lotline db upgrade`"
        )
    return store
