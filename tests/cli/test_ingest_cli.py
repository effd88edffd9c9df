"""``lotline ingest`` as an operator runs it: a separate process, one JSON report per scan."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lotline.cli.main import app
from lotline.cli.run import _nothing_eligible
from lotline.services import Lineage
from lotline.spark.pipeline import Pipeline
from lotline.spark.registration import register
from lotline.store.engine import Store
from support.processes import lotline

PATTERN = r"path:(?P<year>\d{4})(?P<month>\d\d)(?P<day>\d\d)T(?P<hour>\d\d)(?P<minute>\d\d)"


def _landing(
    tmp_path: Path, *names: str, interval: str = "PT5M", namespace: str | None = "cli"
) -> tuple[Path, tuple[str, ...]]:
    """A landing folder holding ``names`` (a line each) and the ingest command that scans it."""
    landing = tmp_path / "landing"
    landing.mkdir()
    for name in names:
        (landing / name).write_text("a\n")
    named = ("-n", namespace) if namespace else ()
    return landing, (
        "ingest",
        "--create",
        *named,
        "-d",
        "raw",
        "--landing",
        str(landing),
        "--interval",
        interval,
        "--time",
        PATTERN,
    )


def test_ingest_registers_lots_and_a_second_run_changes_nothing(backend_url: str, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "20230101T0411.log").write_text("a\n")
    args = ("ingest", "--create", "-n", "cli", "-d", "raw", "--landing", str(landing), "--interval", "PT5M")
    window = ("--from", "2023-01-01T04:10:00", "--to", "2023-01-01T04:20:00", "--time", PATTERN, "--json")
    first = lotline(*args, *window, cwd=tmp_path, db_url=backend_url, process=True)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert (report["registered"], report["empty"], report["missing"]) == (
        ["20230101PT5M050"],
        [],
        ["20230101PT5M051"],
    )
    again = lotline(*args, *window, cwd=tmp_path, db_url=backend_url)
    assert (json.loads(again.stdout)["unchanged"], json.loads(again.stdout)["missing"]) == (
        1,
        ["20230101PT5M051"],
    )

    with Lineage.over(Store(backend_url)) as lineage:
        assert len(lineage.lots.status("cli", dataset="raw")) == 1


@pytest.fixture
def cli(backend_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CliRunner:
    monkeypatch.setenv("LOTLINE_DB_URL", backend_url)
    monkeypatch.chdir(tmp_path)
    return CliRunner()


def test_empty_declarations_by_operator_marker_and_policy_say_who(cli: CliRunner, tmp_path: Path) -> None:
    landing, scan = _landing(tmp_path, "20230101T0411.log")
    (landing / "_EMPTY.20230101PT5M052").write_text("")
    window = ("--from", "2023-01-01T04:10:00", "--to", "2023-01-01T04:25:00")
    first = cli.invoke(app, [*scan, *window])
    assert first.exit_code == 0, first.output
    assert "1 lots registered, 1 empty, 1 missing" in first.output
    assert "empty: 1 declared by the sender's marker _EMPTY.20230101PT5M052" in first.output
    assert "missing: 20230101PT5M051" in first.output

    refused = cli.invoke(app, ["ingest", "-n", "cli", "-d", "raw", "--empty", "--lot", "20230101PT5M050"])
    assert refused.exit_code == 2 and "holds data" in refused.output and "--force" in refused.output
    declared = cli.invoke(app, ["ingest", "-n", "cli", "-d", "raw", "--empty", "--lot", "20230101PT5M051"])
    assert declared.exit_code == 0 and "1 lots declared empty" in declared.output, declared.output
    with Lineage.over(Store(os.environ["LOTLINE_DB_URL"])) as lineage:
        manifest = lineage.manifests.current("cli", "raw", "20230101PT5M051")
        assert manifest is not None and (manifest.declared_by or "").startswith("an operator (")
        kept = lineage.manifests.current("cli", "raw", "20230101PT5M050")
        assert kept is not None and len(kept.objects) == 1  # the refused declaration changed nothing
        forced = cli.invoke(
            app, ["ingest", "-n", "cli", "-d", "raw", "--empty", "--lot", "20230101PT5M050", "--force"]
        )
        assert forced.exit_code == 0 and "1 given a new, empty version" in forced.output, forced.output
        replaced = lineage.manifests.current("cli", "raw", "20230101PT5M050")
        assert replaced is not None and replaced.objects == ()
        assert (replaced.version_number or 0) > (kept.version_number or 0)


def test_bad_arrival_input_is_one_line_and_changes_nothing(cli: CliRunner, tmp_path: Path) -> None:
    landing, scan = _landing(tmp_path, "20230101T0411.log")
    for args, words in (
        ((*scan, "--late-after", "-PT5M"), "not a non-negative ISO-8601 duration"),
        ((*scan, "--late-after", "5 minutes"), "not a non-negative ISO-8601 duration"),
        ((*scan, "--absent", "never"), "not one of missing, empty"),
    ):
        done = cli.invoke(app, list(args))
        assert done.exit_code == 2 and words in done.output, (args, done.output)
    (landing / "_EMPTY.2023-01-01").write_text("")
    bad_marker = cli.invoke(app, list(scan))
    assert bad_marker.exit_code == 2 and "empty marker '_EMPTY.2023-01-01'" in bad_marker.output
    (landing / "_EMPTY.2023-01-01").unlink()
    (landing / "_EMPTY.20230101PT5M050").write_text("")  # beside data for the same interval
    both = cli.invoke(app, list(scan))
    assert both.exit_code == 2 and "holds data for it" in both.output, both.output
    assert (
        not (tmp_path / "lotline.db").exists() or "raw" not in cli.invoke(app, ["status", "-n", "cli"]).output
    )


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "landing").mkdir()
    base = ("ingest", "--create", "-n", "cli", "-d", "raw", "--landing", str(tmp_path / "landing"))
    nowhere = ("ingest", "--create", "-n", "cli", "-d", "raw", "--landing", str(tmp_path / "none"))
    for args, words in (
        ((*base, "--interval", "PT7M"), "duration"),
        ((*base, "--interval", "PT5M", "--time", "path:(oops"), "--time"),
        ((*base, "--interval", "PT5M", "--late", "drop"), "--late"),
        ((*nowhere, "--interval", "PT5M"), "does not exist"),
    ):
        done = lotline(*args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("lotline: error:") and words in lines[0], done.stderr


def test_a_time_pattern_that_matches_nothing_is_one_line_and_exit_1(backend_url: str, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    for name in ("flights_2013-01-01.csv", "flights_2013-01-02.csv"):
        (landing / name).write_text("a,b\n")
    args = (
        "ingest",
        "--create",
        "-n",
        "cli",
        "-d",
        "raw",
        "--landing",
        str(landing),
        "--interval",
        "PT1H",
        "--time",
        PATTERN,
    )
    done = lotline(*args, "--from", "2013-01-01", "--to", "2013-01-02", cwd=tmp_path, db_url=backend_url)
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert (
        "2 files in" in line
        and "none matched the --time pattern" in line
        and "nothing was registered" in line
    )
    with Lineage.over(Store(backend_url)) as lineage:
        assert lineage.lots.status() == [] and lineage.catalog.list_namespaces().items == []


def test_without_a_namespace_the_only_one_is_used(backend_url: str, tmp_path: Path) -> None:
    _, scan = _landing(tmp_path, "20230101T0411.csv", namespace=None)
    args = (*scan, "--json")
    refused = lotline(*args, cwd=tmp_path, db_url=backend_url)
    assert refused.returncode == 2 and "no namespace exists yet" in refused.stderr, refused.stderr
    with Lineage.over(Store(backend_url)) as lineage:
        lineage.catalog.upsert_namespace("only")
        done = lotline(*args, cwd=tmp_path, db_url=backend_url)
        assert done.returncode == 0, done.stderr
        assert [s.lot for s in lineage.lots.status("only", dataset="raw")] == ["20230101PT5M050"]
        manifest = lineage.manifests.current("only", "raw", "20230101PT5M050")
        assert manifest is not None and manifest.objects[0].format == "csv"


def test_lotline_toml_declares_a_sources_arrival_policy(cli: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "lotline.toml").write_text('namespace = "cli"\n\n[datasets.raw]\nabsent = "empty"\n')
    _, scan = _landing(tmp_path, "20230101T0411.log", namespace=None)
    done = cli.invoke(app, [*scan, "--from", "2023-01-01T04:10", "--to", "2023-01-01T04:20"])
    assert done.exit_code == 0, done.output
    assert "1 empty, 0 missing" in done.output and "declared by arrival policy (absent=empty" in done.output
    with Lineage.over(Store(os.environ["LOTLINE_DB_URL"])) as lineage:
        stored = lineage.arrival.of("cli", "raw")
        assert stored is not None and (stored.policy.absent.value, stored.declared_in) == (
            "empty",
            "lotline.toml",
        )
    (tmp_path / "lotline.toml").write_text('[datasets.raw]\nabsent = "never"\n')
    refused = cli.invoke(app, list(scan))
    assert refused.exit_code == 2 and "not one of missing, empty" in refused.output


def test_an_hour_never_sent_is_missing_in_gaps(cli: CliRunner, tmp_path: Path) -> None:
    """As a user meets it, with the real clock: hourly files of the last hours, one never sent."""
    landing = tmp_path / "landing"
    landing.mkdir()
    top = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    hours = [top - timedelta(hours=n) for n in range(8, 1, -1)]
    never = hours[3]
    for at in hours:
        if at != never:
            (landing / f"{at:%Y%m%dT%H}00.log").write_text("a\n")
    scan = (
        "ingest",
        "--create",
        "-n",
        "cli",
        "-d",
        "raw",
        "--landing",
        str(landing),
        "--interval",
        "PT1H",
        "--time",
        PATTERN,
    )
    assert cli.invoke(app, list(scan)).exit_code == 0
    lot = f"{never:%Y%m%d}PT1H{never.hour:03d}"
    gaps = cli.invoke(app, ["gaps", "-n", "cli", "--dataset", "raw"])
    assert gaps.exit_code == 0, gaps.output
    assert " .. now, " in gaps.output.splitlines()[0]  # counted up to now, and said so
    assert any(line.startswith("missing") and lot in line for line in gaps.output.splitlines()), gaps.output
    # The source's watch began with this first ingest: lots due before it are reported, not pushed
    # (tests/lots/test_absence.py moves the clock to see the pass push a lot that falls due later).
    pushed = cli.invoke(app, ["overdue", "--json"])
    assert pushed.exit_code == 0, pushed.output
    assert json.loads(pushed.output)["watched"] == 1
    told = cli.invoke(app, ["overdue"])
    assert told.output.startswith("1 source watched: 0 lots overdue"), told.output


def test_an_invalidated_source_lot_says_only_an_ingest_remakes_it(cli: CliRunner, tmp_path: Path) -> None:
    """Issue 39.5: invalidate's output, and `lotline run`'s hint when nothing is eligible."""
    _, scan = _landing(tmp_path, "20230101T0411.log")
    assert cli.invoke(app, list(scan)).exit_code == 0
    done = cli.invoke(app, ["invalidate", "-n", "cli", "raw", "20230101PT5M050"])
    assert done.exit_code == 0, done.output
    assert "reopened raw 20230101PT5M050" in done.output
    assert "is a source lot: only `lotline ingest -d raw …` makes it again" in done.output
    pipeline = Pipeline("cli")
    raw = pipeline.dataset("raw", format="text", interval="PT5M")

    @pipeline.job(inputs=[raw], output=pipeline.dataset("hits", format="parquet", interval="PT5M"))
    def parse(raw: object) -> object:
        return raw

    with Lineage.over(Store(os.environ["LOTLINE_DB_URL"])) as lineage:
        register(lineage, pipeline)
        hint = _nothing_eligible(lineage, pipeline, pipeline.ordered_jobs())
    assert "1 reopened lots of the source raw wait for `lotline ingest -d raw …` to re-register them" in hint
    again = cli.invoke(app, list(scan))  # the ingest that remakes it
    assert again.exit_code == 0 and "1 lots registered" in again.output, again.output


def test_an_unknown_namespace_or_dataset_is_refused_with_the_close_names(
    cli: CliRunner, tmp_path: Path, backend_url: str
) -> None:
    """A typo in -n or -d creates nothing (issue 39.8): refused in one line naming the close names
    and --create; ``lotline delete`` removes one made by mistake."""
    _, args = _landing(tmp_path, "20230101T0411.log")
    made = cli.invoke(app, [*args, "--from", "2023-01-01T04:10", "--to", "2023-01-01T04:15"])
    assert made.exit_code == 0, made.output
    with Lineage.over(Store(backend_url)) as lineage:
        before = (lineage.catalog.list_namespaces().items, lineage.catalog.list_datasets("cli").items)
        for wrong, words in (
            (["-n", "clj", "-d", "raw"], "no namespace 'clj': did you mean 'cli'? --create makes it."),
            (["-n", "cli", "-d", "rav"], "no dataset of cli 'rav': did you mean 'raw'? --create makes it."),
        ):
            scan = [a for a in args if a not in ("-n", "cli", "-d", "raw", "--create")]
            refused = cli.invoke(app, [scan[0], *wrong, *scan[1:]])
            assert refused.exit_code == 2 and refused.stdout == ""
            assert refused.stderr.splitlines() == [f"lotline: error: {words}"]
        assert (lineage.catalog.list_namespaces().items, lineage.catalog.list_datasets("cli").items) == before
        assert "raw" in cli.invoke(app, ["status"]).output  # still the only namespace: the default
        other = cli.invoke(app, [scan[0], "-n", "other", "-d", "raw", *scan[1:], "--create"])
        assert other.exit_code == 0, other.output
        gone = cli.invoke(app, ["delete", "-n", "other"])
        assert gone.output == "namespace other deleted\n"
        assert [n.name for n in lineage.catalog.list_namespaces().items] == ["cli"]
        assert cli.invoke(app, ["delete", "-n", "nowhere"]).stderr == (
            "lotline: error: Namespace 'nowhere' not found.\n"
        )
