"""Every kind of PostgreSQL connection lotline opens follows the drivers' one liveness policy and
one error translation (``store/drivers.py``): one that died (server restart, terminated backend)
is replaced, silently when it sat idle, with ``DatabaseUnavailable`` when it was just used."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from lotline.domain.errors import DatabaseUnavailable, ValueRefused
from lotline.store import drivers
from lotline.store.engine import Store
from lotline.store.queries import claim_functions
from support.polling import wait_until

pytestmark = pytest.mark.postgres


def _backend_pid(store: Store) -> int:
    with store.read() as connection:
        pid: int = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        return pid


def _terminate(store: Store, pid: int) -> None:
    with Store(store.url).engine.connect() as admin:
        admin.exec_driver_sql(f"SELECT pg_terminate_backend({pid}, 5000)")


@pytest.fixture
def own_store(pg_store: Store) -> Iterator[Store]:
    """A store of the test's own (its connections are the ones the test kills)."""
    store = Store(pg_store.url)
    yield store
    store.dispose()


def _driver_connections(store: Store) -> drivers.DirectConnections:
    assert store.direct_connections is not None
    return store.direct_connections


def test_a_claim_function_call_on_a_lost_connection_fails_once_then_reconnects(
    own_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim functions are called on the driver's own connections (``DirectConnections``); a
    lost one must surface as lotline's error, as for every other statement, and be replaced."""
    monkeypatch.setattr(drivers, "IDLE_PING_SECONDS", 60.0)
    connections = _driver_connections(own_store)
    dead = _driver_backend_pid(connections)
    _terminate(own_store, dead)
    with pytest.raises(DatabaseUnavailable) as failure:
        _finish_unknown_claim(connections)  # not pinged: it was used a moment ago
    assert failure.value.connection_lost
    assert _driver_backend_pid(connections) != dead


def test_an_idle_lost_driver_connection_is_replaced_without_an_error(
    own_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(drivers, "IDLE_PING_SECONDS", 0.05)
    connections = _driver_connections(own_store)
    dead = _driver_backend_pid(connections)
    _terminate(own_store, dead)
    time.sleep(0.1)
    with pytest.raises(claim_functions.NotLive):  # the call itself reached the database
        _finish_unknown_claim(connections)
    assert _driver_backend_pid(connections) != dead


@pytest.mark.parametrize("kind", ["pool", "direct", "event loop", "listener"])
def test_no_server_at_all_is_database_unavailable_on_every_kind_of_connection(
    pg_store: Store, kind: str
) -> None:
    """A worker retries on ``DatabaseUnavailable`` while the server restarts, and the server
    answers 503 on it: failing to connect must be that error, not the driver's own."""
    unreachable = sa.make_url(pg_store.url).set(host="127.0.0.1", port=1)
    store = Store(unreachable.render_as_string(hide_password=False))
    try:
        with pytest.raises(DatabaseUnavailable) as failure:
            if kind == "pool":
                _backend_pid(store)
            elif kind == "direct":
                _driver_backend_pid(_driver_connections(store))
            elif kind == "listener":
                store.listen("nothing")
            else:
                connections = _OnOneLoop(store)
                try:
                    _async_pid(connections)
                finally:
                    connections.close()
        assert failure.value.connection_lost
    finally:
        store.dispose()


def test_a_listener_whose_connection_died_fails_with_database_unavailable(own_store: Store) -> None:
    """The projector and ``lotline events --follow`` listen anew on ``DatabaseUnavailable``; a
    killed LISTEN connection must be that error, not the driver's own."""
    listener = own_store.listen("lotline_test_channel")
    try:
        with own_store.read() as connection:
            pid = connection.exec_driver_sql(
                "SELECT pid FROM pg_stat_activity"
                " WHERE query LIKE 'LISTEN %%' AND datname = current_database()"
            ).scalar_one()
        _terminate(own_store, pid)
        with pytest.raises(DatabaseUnavailable) as failure:
            for _ in range(50):  # the notice of the termination arrives within a wait or two
                listener.wait(0.1)
        assert failure.value.connection_lost
    finally:
        listener.close()


def test_a_transaction_used_again_after_its_connection_was_lost_is_database_unavailable(
    own_store: Store,
) -> None:
    """Issue 29.2: a savepoint's caller that catches the lost connection and goes on in the same
    transaction (as the projector's second, careful pass did) got SQLAlchemy's PendingRollbackError,
    a 500 on the REST side; it is the same outage: DatabaseUnavailable (503)."""
    with pytest.raises(DatabaseUnavailable) as failure, own_store.write() as connection:
        _terminate(own_store, connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
        try:
            with connection.begin_nested():
                connection.exec_driver_sql("SELECT 1")
        except DatabaseUnavailable:
            pass
        connection.exec_driver_sql("SELECT 1")
    assert failure.value.connection_lost and failure.value.http_status == 503
    with own_store.read() as connection:  # and the next transaction has a new connection
        assert connection.exec_driver_sql("SELECT 1").scalar_one() == 1


def test_disposing_the_store_closes_the_driver_connections(pg_store: Store) -> None:
    store = Store(pg_store.url)
    pid = _driver_backend_pid(_driver_connections(store))
    store.dispose()
    _wait_for_backend_exit(pg_store, pid)  # the backend exits right after the client closes


def _driver_backend_pid(connections: drivers.DirectConnections) -> int:
    row = connections.fetch_one("SELECT pg_backend_pid()", ())
    assert row is not None
    return int(row[0])


def _finish_unknown_claim(connections: drivers.DirectConnections) -> None:
    claim_functions.finish_claim(
        connections,
        job_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        owner="w",
        attempt=1,
        success=True,
        at=None,
        output_id=uuid.uuid4(),
        lot="L",
        version_id=uuid.uuid4(),
    )


class _OnOneLoop:
    """The store's event-loop connections, driven from one event loop (as the server's journal
    writer drives them: asyncpg's connections belong to the loop that opened them)."""

    def __init__(self, store: Store) -> None:
        connections = store.event_loop_connections()
        assert connections is not None
        self.connections = connections
        self.loop = asyncio.Runner()

    def run(self, statement: str, **parameters: Any) -> list[Any]:
        return self.loop.run(self.connections.fetch_column(sa.text(statement), parameters))

    def close(self) -> None:
        self.loop.run(self.connections.close())
        self.loop.close()


def _async_pid(connections: _OnOneLoop) -> int:
    (found,) = connections.run("SELECT pg_backend_pid()")
    return int(found)


@pytest.fixture(params=["pool", "asyncio"])
def backend_pid(request: pytest.FixtureRequest, own_store: Store) -> Iterator[Callable[[], int]]:
    """The backend of the next statement on one kind of connection: SQLAlchemy's pool (every
    statement but the hot ones), or the driver's asyncio connections (the server's journal
    writer). The driver's own per-thread connections (claim functions) are tested above."""
    if request.param == "pool":
        yield lambda: _backend_pid(own_store)
        return
    connections = _OnOneLoop(own_store)
    yield lambda: _async_pid(connections)
    connections.close()


def test_an_idle_dead_connection_is_replaced_without_an_error(
    backend_pid: Callable[[], int], own_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(drivers, "IDLE_PING_SECONDS", 0.05)  # the default is 0.1 s
    dead = backend_pid()
    _terminate(own_store, dead)
    time.sleep(0.1)  # idle for longer than IDLE_PING_SECONDS: pinged at checkout
    assert backend_pid() != dead


def test_a_recently_used_dead_connection_fails_once_then_is_replaced(
    backend_pid: Callable[[], int], own_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lost connection surfaces as ``DatabaseUnavailable`` (workers retry on it; the server
    answers 503, retry) and the next statement connects anew."""
    monkeypatch.setattr(drivers, "IDLE_PING_SECONDS", 60.0)
    dead = backend_pid()
    _terminate(own_store, dead)
    with pytest.raises(DatabaseUnavailable) as failure:
        backend_pid()  # not pinged: it was used a moment ago
    assert failure.value.connection_lost
    assert backend_pid() != dead


def test_a_statement_error_keeps_the_journal_writers_connection(pg_store: Store) -> None:
    """Only a lost connection is replaced: after a refused value the same one goes on."""
    connections = _OnOneLoop(pg_store)
    try:
        before = _async_pid(connections)

        with pytest.raises(ValueRefused, match="rejected by the database"):
            connections.run("SELECT CAST(:value AS jsonb)", value='"\\u0000"')
        assert _async_pid(connections) == before
    finally:
        connections.close()


def test_closing_the_journal_writers_connections_ends_their_backends(pg_store: Store) -> None:
    connections = _OnOneLoop(pg_store)
    pid = _async_pid(connections)
    connections.close()
    _wait_for_backend_exit(pg_store, pid)


@pytest.mark.parametrize(
    ("sqlstate", "expected"),
    [("25006", DatabaseUnavailable), ("53300", DatabaseUnavailable), ("40001", DatabaseUnavailable)],
)
def test_a_write_the_server_refuses_for_now_is_database_unavailable(
    pg_store: Store, sqlstate: str, expected: type[Exception]
) -> None:
    """A write reaching a read-only server (25006: after a failover the address may lead to a
    standby) answered 500 "the database failed"; like a server short of connections (53300) or a
    serialization failure (40001) it passes: 503, retry shortly."""
    raise_it = f"DO $$ BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '{sqlstate}'; END $$"
    with pytest.raises(expected) as failure, pg_store.write() as connection:
        connection.exec_driver_sql(raise_it)
    assert failure.value.http_status == 503 and failure.value.sqlstate == sqlstate  # type: ignore[attr-defined]


def test_a_real_read_only_transaction_refusing_a_write_is_database_unavailable(pg_store: Store) -> None:
    with (
        pytest.raises(DatabaseUnavailable, match="accepts no writes") as failure,
        pg_store.write() as connection,
    ):
        connection.exec_driver_sql("SET TRANSACTION READ ONLY")
        connection.exec_driver_sql("CREATE TABLE never_created (x int)")
    assert failure.value.sqlstate == "25006"


def _wait_for_backend_exit(pg_store: Store, pid: int) -> None:
    """Wait until PostgreSQL's backend ``pid`` is gone from ``pg_stat_activity``."""
    query = f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}"
    with Store(pg_store.url).engine.connect() as admin:
        wait_until(
            lambda: not admin.exec_driver_sql(query).scalar(),
            timeout=10,
            what=f"backend {pid} to exit",
            every=0.02,
        )
