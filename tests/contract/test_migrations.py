"""Migrations produce exactly the schema declared in lotline.store.schema, on every database."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from lotline.domain.errors import ConcurrentChange
from lotline.store import migrate
from lotline.store.engine import SchemaNotCurrent, Store, open_store
from lotline.store.schema import metadata
from support.databases import PgDatabases


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """URL of a database that exists but has no tables at all."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fresh.db'}"
    return str(request.getfixturevalue("pg_databases").create(f"empty_{uuid.uuid4().hex[:6]}"))


def _schema_diff(store: Store, declared: sa.MetaData) -> list[object]:
    with store.read() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "compare_server_default": True}
        )
        return list(compare_metadata(context, declared))


def test_migrating_an_empty_database_yields_exactly_the_declared_schema(empty_url: str) -> None:
    store = Store(empty_url)
    try:
        store.upgrade()
        assert store.schema_revision() == migrate.head_revision()
        assert _schema_diff(store, metadata) == []
        tables = set(sa.inspect(store.engine).get_table_names())
        assert tables == set(metadata.tables) | {"alembic_version"}
    finally:
        store.dispose()


def test_the_schema_comparison_notices_drift(empty_url: str) -> None:
    """Guards the test above: a declared column the migrations lack must show up as a difference."""
    drifted = sa.MetaData()
    for table in metadata.tables.values():
        table.to_metadata(drifted)
    drifted.tables["runs"].append_column(sa.Column("undeclared", sa.Integer))
    store = Store(empty_url)
    try:
        store.upgrade()
        diff = _schema_diff(store, drifted)
        assert [d[0] for d in diff if isinstance(d, tuple)] == ["add_column"]
    finally:
        store.dispose()


def test_downgrade_to_base_removes_everything_and_upgrade_restores_it(empty_url: str) -> None:
    store = Store(empty_url)
    try:
        store.upgrade()
        with store.write() as connection:
            command.downgrade(migrate.alembic_config(connection), "base")
        assert set(sa.inspect(store.engine).get_table_names()) <= {"alembic_version"}
        store.upgrade()
        assert _schema_diff(store, metadata) == []
    finally:
        store.dispose()


def test_a_new_sqlite_database_is_created_and_migrated_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "new.db"
    path.parent.mkdir()
    store = open_store(f"sqlite:///{path}")
    try:
        assert path.exists()
        assert store.schema_revision() == migrate.head_revision()
    finally:
        store.dispose()


def test_sqlite_runs_in_wal_mode_with_foreign_keys_enforced(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        with store.read() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        with pytest.raises(ConcurrentChange), store.write() as connection:
            connection.execute(
                metadata.tables["datasets"]
                .insert()
                .values(
                    id=uuid.uuid4(),
                    namespace_id=uuid.uuid4(),
                    name="orphan",
                    type="DB_TABLE",
                    created_at=sa.func.now(),
                    updated_at=sa.func.now(),
                )
            )
    finally:
        store.dispose()


@pytest.mark.postgres
def test_an_unmigrated_server_database_is_refused_with_the_fix(pg_databases: PgDatabases) -> None:
    url = pg_databases.create(f"unmigrated_{uuid.uuid4().hex[:6]}")
    with pytest.raises(SchemaNotCurrent, match="lotline db upgrade"):
        open_store(url)


def test_the_work_list_migration_fills_it_from_the_data_status_table(empty_url: str) -> None:
    """0004 gives every registered consumer a hint for each READY input lot it has not taken."""
    store = Store(empty_url)
    try:
        with store.write() as connection:
            migrate.upgrade(connection, "0003")
        now = datetime.now(UTC)
        t = metadata.tables
        # Rows written as 0003 knew them (today's code would also write columns added since).
        namespace_id = uuid.uuid4()
        ids = {d: uuid.uuid4() for d in ("A", "B")}
        jobs = {j: uuid.uuid4() for j in ("ingest", "consume")}
        stamps = {"created_at": now, "updated_at": now}
        with store.write() as connection:
            connection.execute(t["namespaces"].insert(), {"id": namespace_id, "name": "ns", **stamps})
            connection.execute(
                t["datasets"].insert(),
                [
                    {"id": i, "namespace_id": namespace_id, "name": d, "type": "DB_TABLE", **stamps}
                    for d, i in ids.items()
                ],
            )
            connection.execute(
                t["jobs"].insert(),
                [
                    {"id": i, "namespace_id": namespace_id, "name": j, "type": "BATCH", **stamps}
                    for j, i in jobs.items()
                ],
            )
            connection.execute(
                t["lot_jobs"].insert(),
                [
                    {
                        "job_id": jobs["ingest"],
                        "output_dataset_id": ids["A"],
                        "created_at": now,
                        "updated_at": now,
                    },
                    {
                        "job_id": jobs["consume"],
                        "output_dataset_id": ids["B"],
                        "created_at": now,
                        "updated_at": now,
                    },
                ],
            )
            connection.execute(
                t["lot_job_inputs"].insert(), {"job_id": jobs["consume"], "dataset_id": ids["A"]}
            )
            rows = [(ids["A"], lot, jobs["ingest"], "OUTPUT", "READY") for lot in ("1", "2", "3", "4")] + [
                (ids["A"], "1", jobs["consume"], "INPUT", "DONE"),
                (ids["A"], "2", jobs["consume"], "INPUT", "RUNNING"),
                (ids["A"], "3", jobs["consume"], "INPUT", "ERROR"),
                (ids["A"], "5", jobs["ingest"], "OUTPUT", "RUNNING"),
            ]
            connection.execute(
                t["data_status"].insert(),
                [
                    {"dataset_id": d, "lot": lot, "job_id": j, "role": role, "status": status}
                    | {"created_at": now, "updated_at": now}
                    for d, lot, j, role, status in rows
                ],
            )
        store.upgrade()
        with store.read() as connection:
            hints = connection.execute(sa.select(t["lot_frontier"].c.job_id, t["lot_frontier"].c.lot)).all()
        assert sorted((j, lot) for j, lot in hints) == [(jobs["consume"], "3"), (jobs["consume"], "4")]
    finally:
        store.dispose()


def _columns(name: str, *columns: str) -> sa.TableClause:
    """Some of a table's columns, with their declared types: a table as an older revision knew it."""
    return sa.table(name, *(sa.column(c, metadata.tables[name].c[c].type) for c in columns))


def test_the_error_kind_migration_marks_the_check_failures_written_before(empty_url: str) -> None:
    """0026 sets ``check_failed`` on runs whose reason a failing check wrote (the gap report's
    count of them does not change), and nothing on the others."""
    store = Store(empty_url)
    try:
        with store.write() as connection:
            migrate.upgrade(connection, "0025_runs_by_job_version")
        now = datetime.now(UTC)
        stamps = {"created_at": now, "updated_at": now}
        namespace_id, job_id = uuid.uuid4(), uuid.uuid4()
        # The runs table as 0025 knew it (today's has error_kind).
        runs = _columns("runs", "id", "job_id", "state", "error", "created_at", "updated_at")
        reasons = {
            "one": "check dep_delay IS NOT NULL failed: 1 of 4 rows",
            "several": "output hits: check unique(flight) failed: 2 duplicates",
            "other": "ValueError: bad line",
            "none": None,
        }
        ids = {name: uuid.uuid4() for name in reasons}
        with store.write() as connection:
            connection.execute(
                metadata.tables["namespaces"].insert(), {"id": namespace_id, "name": "ns", **stamps}
            )
            connection.execute(
                _columns("jobs", "id", "namespace_id", "name", "type", "created_at", "updated_at").insert(),
                {"id": job_id, "namespace_id": namespace_id, "name": "j", "type": "BATCH", **stamps},
            )
            connection.execute(
                runs.insert(),
                [
                    {"id": ids[name], "job_id": job_id, "state": "FAILED", "error": reason, **stamps}
                    for name, reason in reasons.items()
                ],
            )
        store.upgrade()
        table = metadata.tables["runs"]
        with store.read() as connection:
            kinds = dict(connection.execute(sa.select(table.c.id, table.c.error_kind)).all())
        assert {name: kinds[i] for name, i in ids.items()} == {
            "one": "check_failed",
            "several": "check_failed",
            "other": None,
            "none": None,
        }
    finally:
        store.dispose()
