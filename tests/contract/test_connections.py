"""Pooled PostgreSQL connections that died (server restart, terminated backend) are replaced."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from lotline.store import dialect
from lotline.store.engine import Store

pytestmark = pytest.mark.postgres


def _backend_pid(store: Store) -> int:
    with store.read() as connection:
        pid: int = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        return pid


def _terminate(store: Store, pid: int) -> None:
    with Store(store.url).engine.connect() as admin:
        admin.exec_driver_sql(f"SELECT pg_terminate_backend({pid}, 5000)")


def test_an_idle_dead_connection_is_replaced_without_an_error(
    pg_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dialect, "PING_AFTER_IDLE_S", 0.05)  # the default is 0.1 s
    store = Store(pg_store.url)
    try:
        dead = _backend_pid(store)
        _terminate(store, dead)
        time.sleep(0.1)  # idle for longer than PING_AFTER_IDLE_S: pinged at checkout
        assert _backend_pid(store) != dead
    finally:
        store.dispose()


def test_a_recently_used_dead_connection_fails_once_then_the_pool_recovers(
    pg_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dialect, "PING_AFTER_IDLE_S", 60.0)
    store = Store(pg_store.url)
    try:
        dead = _backend_pid(store)
        _terminate(store, dead)
        with pytest.raises(sa.exc.DBAPIError) as failure:
            _backend_pid(store)  # not pinged: it was used a moment ago
        assert failure.value.connection_invalidated
        assert _backend_pid(store) != dead
    finally:
        store.dispose()
