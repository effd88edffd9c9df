"""The first command works (issue 27 §2): the namespace is inferred, the configuration is shown with
its sources, commands that only read create no database, and a URL lotline cannot use is one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer

from lotline.cli.main import app
from lotline.services import Lineage
from lotline.store.engine import Store
from support.lots import LotWorld
from support.processes import lotline


def _one_line_error(done: object, *words: str) -> None:
    returncode, stderr = done.returncode, done.stderr  # type: ignore[attr-defined]
    assert returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lotline: error:"), stderr
    for word in words:
        assert word in lines[0], stderr


def test_the_namespace_is_the_configured_one_else_the_only_one_else_the_one_with_lots(
    backend_url: str, tmp_path: Path
) -> None:
    with Lineage.over(Store(backend_url)) as lineage:
        first = LotWorld(lineage, "alpha")
        first.job("ingest", output="raw")
        first.produce("ingest", "d1")

        only = lotline("status", "--json", cwd=tmp_path, db_url=backend_url, process=True)
        assert only.returncode == 0, only.stderr
        assert json.loads(only.stdout)["namespace"] == "alpha"
        assert [r["lot"] for r in json.loads(only.stdout)["lots"]] == ["d1"]

        second = LotWorld(lineage, "beta")
        second.job("ingest", output="raw")  # a namespace without lots: alpha stays the default
        without_lots = lotline("status", "--json", cwd=tmp_path, db_url=backend_url)
        assert json.loads(without_lots.stdout)["namespace"] == "alpha", without_lots.stderr
        second.produce("ingest", "d1")  # two namespaces with lots: name one
        for command in (
            ("status",),
            ("gaps", "--dataset", "raw", "--from", "2023-01-01", "--to", "2023-01-02"),
        ):
            _one_line_error(
                lotline(*command, cwd=tmp_path, db_url=backend_url), "alpha", "beta", "--namespace"
            )

        (tmp_path / "lotline.toml").write_text('namespace = "beta"\n')
        configured = lotline("status", "--json", cwd=tmp_path, db_url=backend_url)
        assert configured.returncode == 0, configured.stderr
        assert json.loads(configured.stdout)["namespace"] == "beta"
        given = lotline("status", "--json", "-n", "alpha", cwd=tmp_path, db_url=backend_url)
        assert json.loads(given.stdout)["namespace"] == "alpha"


def test_an_empty_database_asks_for_a_namespace(backend_url: str, tmp_path: Path) -> None:
    _one_line_error(lotline("status", cwd=tmp_path, db_url=backend_url), "no namespace exists yet")


def test_version_and_config_show_what_is_in_use(tmp_path: Path) -> None:
    version = lotline("--version", cwd=tmp_path, process=True)
    assert version.returncode == 0 and version.stdout.startswith("lotline "), version.stderr
    (tmp_path / "lotline.toml").write_text('LOTLINE_WAREHOUSE = "s3://bucket/wh"\nnamespace = "weblogs"\n')
    done = lotline(
        "config",
        "--json",
        cwd=tmp_path,
        db_url="postgresql://lotline:s3cret@db.example:5432/lotline",
        settings={"LOTLINE_API_TOKEN": "tok3n"},
    )
    assert done.returncode == 0, done.stderr
    rows = {r["key"]: (r["value"], r["source"]) for r in json.loads(done.stdout)}
    assert rows["LOTLINE_DB_URL"] == ("postgresql+psycopg://lotline:***@db.example:5432/lotline", "env")
    assert rows["LOTLINE_WAREHOUSE"] == ("s3://bucket/wh", str(tmp_path / "lotline.toml"))
    assert rows["LOTLINE_NAMESPACE"] == ("weblogs", str(tmp_path / "lotline.toml"))
    assert rows["LOTLINE_SPARK_MASTER"] == ("local[*]", "default")
    assert rows["LOTLINE_API_TOKEN"] == ("****", "env")
    assert "s3cret" not in done.stdout and "tok3n" not in done.stdout
    assert not (tmp_path / "lotline.db").exists()


@pytest.mark.parametrize(
    "command",
    [
        ("status",),
        ("status", "--lots", "-n", "x"),
        ("gaps", "--dataset", "d", "-n", "x", "--from", "2023-01-01", "--to", "2023-01-02"),
        ("events",),
        ("cleanup", "--dry-run"),
        ("invalidate", "d", "lot", "-n", "x"),
        ("project",),
    ],
)
def test_commands_that_only_read_create_no_database(tmp_path: Path, command: tuple[str, ...]) -> None:
    _one_line_error(lotline(*command, cwd=tmp_path), "no lotline database at sqlite:///./lotline.db")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("lotline.db", ("'lotline.db' is not a URL", "sqlite:///")),
        ("mysql://me:pw@host/db", ("mysql://me:***@host/db", "is not one lotline can use")),
    ],
)
def test_a_database_url_lotline_cannot_use_is_one_line(
    tmp_path: Path, url: str, words: tuple[str, ...]
) -> None:
    for command in (("status",), ("db", "upgrade")):
        done = lotline(*command, cwd=tmp_path, db_url=url)
        _one_line_error(done, *words)
        assert "pw" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_unreachable_database_names_its_url(tmp_path: Path) -> None:
    url = "postgresql://postgres:pw@127.0.0.1:5432/lotline_no_such_database"
    _one_line_error(
        lotline("status", cwd=tmp_path, db_url=url),
        "postgresql+psycopg://postgres:***@127.0.0.1:5432/lotline_no_such_database",
    )


def test_config_and_database_errors_mask_every_secret_of_every_url(tmp_path: Path) -> None:
    """Issue 39.14: a password in the database URL's query, and userinfo, path and query tokens of
    the OpenLineage, webhook and S3 endpoint URLs, are masked by `lotline config` and by the
    "cannot use the database" error; the rest of each URL is shown."""
    settings = {
        "LOTLINE_OPENLINEAGE_URL": "https://ol:olpass1@marquez.example/api/v1/lineage?api_key=olkey2",
        "LOTLINE_WEBHOOK_URLS": "https://hooks.example/services/T01/B02/hookT0ken3abcdefghij,"
        "http://receiver.example/in?sig=hooksig4",
        "LOTLINE_S3_ENDPOINT_URL": "https://s3user:s3pass5@minio.example:9000",
    }
    url = "postgresql://postgres@127.0.0.1:5432/lotline_no_such_database?password=dbpass6"
    done = lotline("config", "--json", cwd=tmp_path, db_url=url, settings=settings)
    assert done.returncode == 0, done.stderr
    rows = {r["key"]: r["value"] for r in json.loads(done.stdout)}
    assert rows["LOTLINE_DB_URL"] == (
        "postgresql+psycopg://postgres@127.0.0.1:5432/lotline_no_such_database?password=***"
    )
    assert rows["LOTLINE_OPENLINEAGE_URL"] == "https://***@marquez.example/api/v1/lineage?api_key=***"
    assert rows["LOTLINE_WEBHOOK_URLS"] == (
        "https://hooks.example/services/T01/B02/***,http://receiver.example/in?sig=***"
    )
    assert rows["LOTLINE_S3_ENDPOINT_URL"] == "https://***@minio.example:9000"
    failed = lotline("status", cwd=tmp_path, db_url=url, settings=settings)
    _one_line_error(failed, "lotline_no_such_database?password=***")
    for output in (done.stdout, failed.stdout + failed.stderr):
        for secret in ("olpass1", "olkey2", "hookT0ken3", "hooksig4", "s3pass5", "s3user", "dbpass6"):
            assert secret not in output


def test_the_command_list_keeps_every_word_of_each_command_s_help_at_80_columns(tmp_path: Path) -> None:
    """A docstring of several lines is one paragraph: in rich's default markup mode each line was
    cut at the terminal's width on its own, and `lotline --help` lost the middle of most help texts."""
    done = lotline("--help", cwd=tmp_path, settings={"COLUMNS": "80", "TERM": "dumb"})
    assert done.returncode == 0, done.stderr
    shown = " ".join(re.sub(r"[│╭╮╰╯─]", " ", done.stdout).split())
    group = typer.main.get_command(app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        first_paragraph = (command.help or "").split("\n\n")[0]
        words = " ".join(first_paragraph.replace("`", "").split())
        assert f"{name} {words}" in shown, name
