"""The test databases' helpers that test modules import (conftest.py is not importable by name when
pytest collects several directories that each have one): the PostgreSQL databases of a run, and
fresh migrated databases of either kind."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from lotline.services import Lineage
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from lotline.store.schema import metadata

#: ``@pytest.mark.parametrize("backend_url", ON_POSTGRESQL, indirect=True)``: a test about PostgreSQL
#: (or one that needs to run once, on the production database).
ON_POSTGRESQL = [pytest.param("postgresql", marks=pytest.mark.postgres)]

PG_ADMIN_URL = os.environ.get("LOTLINE_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


class PgDatabases:
    """Creates uniquely named databases on the test server and drops them all at the end."""

    def __init__(self, admin: sa.Engine) -> None:
        self.admin = admin
        self.created: list[str] = []
        self.run_tag = uuid.uuid4().hex[:8]

    def create(self, label: str) -> str:
        name = f"lotline_test_{self.run_tag}_{label}"
        if name in self.created:  # a session fixture made again (pytest's order of parameters)
            name = f"{name}_{len(self.created)}"
        with self.admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return sa.make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        with self.admin.connect() as connection:
            for name in self.created:
                connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.admin.dispose()


#: Emptying the run's PostgreSQL database before a test: every table's rows deleted, dependent
#: tables first, and every identity restarted. ``TRUNCATE … RESTART IDENTITY CASCADE`` did the same
#: in 0.9-1.2 s measured under load (it makes new files for all 29 tables); these DELETEs of a
#: test's few rows take 20-50 ms there, and about half the suite's tests start with one.
_EMPTY_PG = ";\n".join(
    [f'DELETE FROM "{t.name}"' for t in reversed(metadata.sorted_tables)]
    + [
        f"SELECT setval(pg_get_serial_sequence('\"{t.name}\"', '{t.autoincrement_column.name}'), 1, false)"
        for t in metadata.sorted_tables
        if t.autoincrement_column is not None
    ]
)


def _empty_pg(store: Store) -> None:
    with store.write() as connection:
        connection.exec_driver_sql(_EMPTY_PG)


def fresh_url(request: pytest.FixtureRequest, backend: str) -> str:
    """URL of an empty, migrated database of kind ``backend`` ("sqlite" or "postgresql")."""
    if backend == "sqlite":
        directory: Path = request.getfixturevalue("tmp_path")
        path = directory / f"lotline-{uuid.uuid4().hex[:8]}.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    store: Store = request.getfixturevalue("pg_store")
    _empty_pg(store)
    return store.url


@contextmanager
def empty_database(request: pytest.FixtureRequest, backend: str) -> Iterator[Lineage]:
    """A fresh database's use cases, for tests that need several in one test (e.g. Hypothesis)."""
    warehouse = request.getfixturevalue("tmp_path") / "warehouse"
    with Lineage.over(store_of(request, fresh_url(request, backend)), Storage(str(warehouse))) as lineage:
        yield lineage


def store_of(request: pytest.FixtureRequest, url: str) -> Store:
    """A ``Store`` over ``url`` from ``fresh_url``: on PostgreSQL the run's one (its engine keeps the
    SQL it compiled; an engine per test compiled every statement again), else a new one."""
    return request.getfixturevalue("pg_store") if url.startswith("postgresql") else Store(url)
