"""``Store.transact``: a transaction PostgreSQL ends as a deadlock's victim changed nothing and is
tried again, so two processes that lock rows in opposite orders both commit (issue 39.19)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from lotline.domain.errors import DatabaseUnavailable
from lotline.services import Lineage
from lotline.store.engine import Store
from lotline.store.schema import namespaces
from support import victim_workers
from support.databases import fresh_url
from support.polling import wait_until
from support.processes import separate_processes

pytestmark = pytest.mark.postgres


def _descriptions(store: Store) -> dict[str, str | None]:
    with store.read() as connection:
        rows = connection.execute(sa.select(namespaces.c.name, namespaces.c.description))
        return {name: description for name, description in rows if name in ("first", "second")}


def test_a_deadlocks_victim_is_tried_again_and_both_transactions_commit(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = fresh_url(request, "postgresql")
    lineage = Lineage.over(Store(url))
    store = lineage.store
    try:
        for name in ("first", "second"):
            lineage.catalog.upsert_namespace(name)
        process = separate_processes().Process(
            target=victim_workers.cross, args=(url, "first", "second", str(tmp_path))
        )
        process.start()
        with store.write() as connection:
            connection.exec_driver_sql("SET LOCAL deadlock_timeout = '5s'")  # the process detects it first
            connection.execute(
                sa.update(namespaces).where(namespaces.c.name == "second").values(description="test")
            )
            wait_until(
                lambda: (tmp_path / "first").exists() or not process.is_alive(),
                timeout=120,
                what="the process to lock its row",
                every=0.02,
            )
            assert (tmp_path / "first").exists(), "the process ended before it locked its row"
            (tmp_path / "second").touch()
            # Waits for the process's row; the process then waits for ours: a deadlock, whose
            # victim is the process (its deadlock_timeout is shorter). Ours goes on and commits.
            connection.execute(
                sa.update(namespaces).where(namespaces.c.name == "first").values(description="test")
            )
        process.join(120)
        assert process.exitcode == 0
        assert (tmp_path / "tries").read_text() == "2"
        assert _descriptions(store) == {"first": "process, try 2", "second": "process, try 2"}
    finally:
        lineage.close()


def test_any_other_failure_is_raised_at_once(request: pytest.FixtureRequest) -> None:
    store = Store(fresh_url(request, "postgresql"))
    tries = []

    def work(connection: sa.Connection) -> None:
        tries.append(1)
        connection.exec_driver_sql("SELECT pg_sleep(0) FROM no_such_table")

    try:
        with pytest.raises(Exception) as raised:
            store.transact(work)
        assert not isinstance(raised.value, DatabaseUnavailable) or raised.value.sqlstate not in (
            "40P01",
            "40001",
        )
        assert tries == [1]
    finally:
        store.dispose()
