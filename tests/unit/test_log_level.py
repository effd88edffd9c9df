"""Spark's log level for lotline's commands: ERROR by default, ``LOTLINE_LOG_LEVEL`` or ``--verbose``
otherwise, given to the driver JVM at launch (the noise itself is checked in
``tests/spark/test_interrupt.py``, on a real ``lotline run``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lotline.cli.main import app
from lotline.cli.run import with_verbosity
from lotline.domain.errors import InvalidInput
from lotline.services.config import load_settings
from lotline.spark.session import log_options


def test_the_level_is_error_unless_configured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LOTLINE_LOG_LEVEL", raising=False)
    assert load_settings(tmp_path).log_level == "ERROR"
    assert with_verbosity(load_settings(tmp_path), True).log_level == "WARN"
    monkeypatch.setenv("LOTLINE_LOG_LEVEL", "info")
    assert load_settings(tmp_path).log_level == "INFO"
    monkeypatch.setenv("LOTLINE_LOG_LEVEL", "loud")
    with pytest.raises(InvalidInput, match="LOTLINE_LOG_LEVEL 'loud' is not one of OFF, FATAL, ERROR"):
        load_settings(tmp_path)


def test_a_bad_level_is_one_line_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LOTLINE_LOG_LEVEL", "loud")
    monkeypatch.setenv("LOTLINE_DB_URL", f"sqlite:///{tmp_path / 'lotline.db'}")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app, ["run", str(Path(__file__).parent.parent / "spark/pipelines/weblogs.py")]
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("lotline: error: LOTLINE_LOG_LEVEL 'loud' is not one of")
    assert not (tmp_path / "lotline.db").exists()  # nothing was created


def test_the_driver_gets_lotline_s_log4j_configuration_after_the_user_s_options() -> None:
    options = log_options("WARN", "-Xss4m")
    assert options.startswith("-Xss4m -Dlog4j2.configurationFile=file:")
    assert options.endswith("-Dlotline.log.level=warn -Dlotline.task.log.level=warn")
    assert log_options("ERROR").endswith("-Dlotline.log.level=error -Dlotline.task.log.level=fatal")
    path = Path(options.split("configurationFile=file:", 1)[1].split()[0])
    assert "${sys:lotline.log.level:-error}" in path.read_text()
    mine = "-Dlog4j2.configurationFile=file:/etc/my-log4j2.properties"
    assert log_options("ERROR", mine) == mine  # a user's own configuration wins
