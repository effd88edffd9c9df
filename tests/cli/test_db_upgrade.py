"""``lotline db upgrade`` as a user runs it: a separate process, configured by environment or file."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from lotline.store import migrate
from lotline.store.engine import Store
from support.databases import PgDatabases
from support.processes import lotline


def _revision(url: str) -> str | None:
    store = Store(url)
    try:
        return store.schema_revision()
    finally:
        store.dispose()


def test_upgrade_creates_the_default_sqlite_database(tmp_path: Path) -> None:
    done = lotline("db", "upgrade", cwd=tmp_path, process=True)
    assert done.returncode == 0, done.stderr
    assert f"schema revision {migrate.head_revision()}" in done.stdout
    assert _revision(f"sqlite:///{tmp_path / 'lotline.db'}") == migrate.head_revision()


def test_upgrade_reads_lotline_toml(tmp_path: Path) -> None:
    (tmp_path / "lotline.toml").write_text('LOTLINE_DB_URL = "sqlite:///./from-file.db"\n')
    done = lotline("db", "upgrade", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "from-file.db").exists()


@pytest.mark.postgres
def test_upgrade_migrates_postgresql_and_is_idempotent(pg_databases: PgDatabases, tmp_path: Path) -> None:
    url = pg_databases.create(f"cli_{uuid.uuid4().hex[:6]}").replace("+psycopg", "")
    for _ in range(2):
        done = lotline("db", "upgrade", cwd=tmp_path, db_url=url)
        assert done.returncode == 0, done.stderr
    assert _revision(url) == migrate.head_revision()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ({"db_url": "postgresql://postgres@127.0.0.1:5432/lotline_no_such_db"}, "cannot use the database"),
        ({"toml": 'LOTLINE_DB_URL = "sqlite:///x.db"\nLOTLINE_TYPO = 1\n'}, "unknown keys"),
        ({"toml": "LOTLINE_DB_URL = [\n"}, "not valid TOML"),
    ],
)
def test_bad_configuration_is_one_line_and_exit_code_2(
    tmp_path: Path, setup: dict[str, str], message: str
) -> None:
    if "toml" in setup:
        (tmp_path / "lotline.toml").write_text(setup["toml"])
    done = lotline("db", "upgrade", cwd=tmp_path, db_url=setup.get("db_url"))
    assert done.returncode == 2
    assert done.stderr.startswith("lotline: error:")
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.db").exists()
