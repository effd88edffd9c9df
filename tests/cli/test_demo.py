"""``lotline demo`` as a newcomer runs it: a separate process, its own Spark, an empty folder."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lotline.cli import demo
from lotline.domain.coordination import Status
from lotline.domain.manifests import ManifestState
from lotline.domain.versions import VersionState
from lotline.services import Lineage, open_lineage
from lotline.storage.objects import Storage
from support.processes import lotline

NS = "weblogs"
BROKEN_LOT_ORDINAL = "140"  # 11:40, the file with a broken line
QUIET_ORDINAL = "125"  # 10:25, when no request came: no file


def _demo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # local[1]: the suite's other Spark work shares two cores. A process of its own: its Spark session.
    settings = {"LOTLINE_SPARK_MASTER": "local[1]"}
    return lotline("demo", *args, cwd=cwd, settings=settings, timeout=900, process=True)


@pytest.mark.slow
def test_the_demo_fails_a_lot_fixes_it_and_finishes_the_day(tmp_path: Path) -> None:
    done = _demo(cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = tmp_path / "lotline-demo"
    assert "malformed log line" in done.stdout + done.stderr
    assert (folder / "weblogs.py").is_file()

    with open_lineage(f"sqlite:///{folder / 'lotline.db'}", Storage(str(folder / "warehouse"))) as lineage:
        # Yesterday's day of lots, and today's up to the demo's time: raw_logs declares its quiet
        # intervals empty (absent="empty"), so every lot due is there and computed.
        ready = {job: lineage.lots.counts(NS, job) for job in ("parse", "hourly_counts", "daily_report")}
        sources = lineage.lots.counts(NS, "ingest:raw_logs")
        assert set(sources) == {Status.READY} and sources[Status.READY] >= 288
        assert ready["parse"] == sources  # each lot of raw_logs parsed, once
        assert ready["hourly_counts"] == {Status.READY: sources[Status.READY] // 12}
        assert ready["daily_report"] == {Status.READY: 1}
        empty = lineage.manifests.current(NS, "raw_logs", f"{broken_raw_day(lineage)}PT5M{QUIET_ORDINAL}")
        assert empty is not None and empty.declared_by == "arrival policy (absent=empty, late_after=PT5M)"
        # Yesterday's 11:40 (today's, once the demo runs after 11:45, is a lot like any other).
        broken_raw = f"{broken_raw_day(lineage)}PT5M{BROKEN_LOT_ORDINAL}"
        assert broken_raw in {s.lot for s in lineage.lots.status(NS, dataset="raw_logs")}
        raw_history = lineage.manifests.history(NS, "raw_logs", broken_raw)
        assert [m.state for m in raw_history] == [ManifestState.COMPLETE, ManifestState.COMPLETE]
        assert raw_history[0].objects[0].size > raw_history[1].objects[0].size  # the broken line is gone

        parse_history = lineage.manifests.history(NS, "hits", broken_raw)
        assert [(m.attempt, m.state) for m in parse_history] == [
            (1, ManifestState.REMOVED),  # what the failed attempt wrote, deleted
            (2, ManifestState.COMPLETE),
        ]
        failed_run = parse_history[0].run_id
        assert failed_run is not None
        run = lineage.runs.get_run(failed_run)
        assert run.state.value == "FAILED"
        assert "malformed log line" in run.facets["errorMessage"]["message"]

        # parse's check warns on server errors: the lots are published, the result is their versions'.
        assert "published with a warning: job parse: check status < 500 warned on " in done.stdout
        # Its last table counts the lots as the start page does, up to now: every lot due is there.
        # It names only the states some lot is in (as the start page does), so it fits 80 columns.
        lines = done.stdout.splitlines()
        [header] = [line.split() for line in lines if line.startswith("job ")]
        [parse_row] = [line.split() for line in lines if line.startswith("parse ")]
        assert not any("…" in word for word in header), header  # no header cut to fit
        counts = dict(zip(header[1:], (int(cell) for cell in parse_row[1:]), strict=True))
        complete, empty, warned = counts.pop("complete"), counts.pop("empty"), counts.pop("warned")
        assert complete + empty == sources[Status.READY] and empty > 0 and 0 < warned <= complete
        # The last lots may not be due yet: pending at most; nothing else is left.
        assert counts.pop("pending", 0) <= 2 and set(counts.values()) <= {0}, counts
        assert "the quiet 10:25 among them" in " ".join(done.stdout.split())  # however rich wraps it
        [version] = lineage.versions.list_versions(
            NS, "hits", broken_raw, states=[VersionState.CURRENT]
        ).items
        [assertion] = version.facets["dataQualityAssertions"]["assertions"]
        assert (assertion["assertion"], assertion["column"]) == ("status < 500", "status")

        day = broken_raw[:8]
        report = lineage.manifests.current(NS, "daily_report", f"{day}P1D000")
        assert report is not None and report.state is ManifestState.COMPLETE and report.row_count == 12
    _type_every_next_command(done.stdout, folder)


def broken_raw_day(lineage: Lineage) -> str:
    """The demo's day (yesterday when it ran), as lot ids begin."""
    return min(s.lot for s in lineage.lots.status(NS, dataset="raw_logs"))[:8]


def _type_every_next_command(stdout: str, folder: Path) -> None:
    """Each "Next" line, typed as printed into a shell (``serve`` excepted: it runs until stopped)."""
    printed = stdout[stdout.index("Next, one command per line") :].splitlines()[1:]
    commands = [line.split("    # ")[0].strip() for line in printed if line.startswith("  ")]
    assert commands[0] == f"cd {folder}"
    assert any(" ingest " in c and "'path:" in c and "…" not in c for c in commands)
    for command in commands[1:]:
        if command.endswith(" serve"):
            continue
        done = _typed(commands[0], command)
        if " ingest " in command:
            assert "0 lots registered, 0 empty, 0 missing" in done.stdout, done.stdout
            assert "0 new versions (late or corrected)" in done.stdout, done.stdout
        if command.endswith(" run weblogs.py"):  # nothing, or the lots that fell due since the demo
            assert "Spark was not started" in done.stdout or "lotline run weblogs" in done.stdout
    _edit_a_transform_and_run(commands, folder)


def _edit_a_transform_and_run(commands: list[str], folder: Path) -> None:
    """The hint "after editing a transform" is true: a docstring changes nothing; a change to what
    hourly_counts computes makes its lots stale, and the run prints the backfill that remakes
    them, which reopens exactly those (typed as printed)."""
    [run] = [c for c in commands if c.endswith(" run weblogs.py")]
    pipeline = folder / "weblogs.py"
    said = '"""Requests and bytes per path and status in the hour."""'
    pipeline.write_text(pipeline.read_text().replace(said, said[:-3] + ' (edited)."""\n    # a comment'))
    assert " stale" not in _typed(commands[0], run).stdout  # no new version: nothing stale
    counted = 'F.count("*").alias("hits"),'
    pipeline.write_text(pipeline.read_text().replace(counted, counted + ' F.max("bytes").alias("largest"),'))
    told = " ".join(_typed(commands[0], run).stdout.split())
    assert "lots of hourly_counts are stale (made by version 1, now 2): `" in told, told
    backfill = told.split("are stale (made by version 1, now 2): `")[1].split("`")[0]
    assert backfill.endswith("--only stale") and " -n weblogs --job hourly_counts --from " in backfill
    stale = int(told.split(" lots of hourly_counts are stale")[0].rsplit(" ", 1)[1])
    done = _typed(commands[0], backfill)
    assert f"reopened {stale} lots" in done.stdout, done.stdout


def _typed(cd: str, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` typed into a shell in the demo's folder, as printed; it must succeed."""
    done = subprocess.run(
        f"{cd} && {command}",
        shell=True,
        capture_output=True,
        text=True,
        timeout=300,
        env={**_without_lotline_settings(), "LOTLINE_SPARK_MASTER": "local[1]"},
        check=False,
    )
    assert done.returncode == 0, (command, done.stderr[-2000:])
    return done


def _without_lotline_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")}


def test_the_demo_refuses_a_folder_it_did_not_make(tmp_path: Path) -> None:
    mine = tmp_path / "lotline-demo"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    done = _demo(cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("lotline: error:") and "not empty" in done.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_a_previous_demo_folder_is_replaced(tmp_path: Path) -> None:
    folder = tmp_path / "lotline-demo"
    made = demo._prepare(folder)
    (made / "lotline.db").write_text("an old demo's database")
    again = demo._prepare(folder)
    assert again == made and sorted(p.name for p in again.iterdir()) == [demo.MARKER]
