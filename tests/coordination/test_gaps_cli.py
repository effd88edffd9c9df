"""``lotline gaps | backfill`` run as separate processes against both databases, errors included."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lotline.domain.manifests import ManifestDraft
from lotline.services.lots import OutputWritten
from support.lots import LotWorld
from support.processes import lotline


def hour(n: int) -> str:
    return f"20230101PT1H{n:03d}"


RANGE = ["--from", "2023-01-01", "--to", "2023-01-01T04:00:00Z"]
#: With hour 4, which the first test publishes empty.
RANGE_5 = ["--from", "2023-01-01", "--to", "2023-01-01T05:00:00Z"]


def _lotline(
    backend_url: str, tmp_path: Path, *args: str, process: bool = False
) -> subprocess.CompletedProcess[str]:
    return lotline(*args, cwd=tmp_path, db_url=backend_url, process=process)


@pytest.fixture
def hours(world: LotWorld) -> LotWorld:
    """raw: hours 00-02 READY; cleaned: 00 complete, 01 failed, 02 missing, 03 blocked (raw 03 missing)."""
    world.job("land", output="raw")
    world.job("clean", output="cleaned", inputs=["raw"])
    world.produce("land", hour(0), hour(1), hour(2))
    world.produce("clean", hour(0))
    failed = world.claim("clean", hour(1))
    assert failed is not None
    world.lots.fail(failed, error="ValueError: bad row")
    return world


def _complete_empty(world: LotWorld, job: str, dataset: str, lot: str) -> None:
    claim = world.claim(job, lot)
    assert claim is not None
    location = world.lineage.storage.attempt_uri(world.ns, dataset, lot, claim.attempt)
    world.lots.complete(
        claim, outputs={claim.dataset: OutputWritten(ManifestDraft(location, (), row_count=0))}
    )


def test_gaps_prints_counts_and_runs(hours: LotWorld, backend_url: str, tmp_path: Path) -> None:
    """The counts are the web UI's: its states and order, an empty lot apart from complete ones."""
    _complete_empty(hours, "land", "raw", hour(4))
    _complete_empty(hours, "clean", "cleaned", hour(4))
    result = _lotline(backend_url, tmp_path, "gaps", "-n", hours.ns, "--job", "clean", *RANGE_5, process=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "cleaned (job clean): 5 PT1H lots, 2023-01-01 00:00:00 .. 2023-01-01 05:00:00 UTC"
    assert lines[1].split() == [
        *("complete", "1", "empty", "1", "stale", "0", "running", "0", "pending", "0", "failed", "1"),
        *("blocked", "1", "missing", "1", "held", "0"),
    ]
    assert [line.split() for line in lines[3:]] == [
        ["STATE", "FROM", "TO", "COUNT", "WAITING", "ON", "/", "REASON"],
        ["failed", hour(1), hour(1), "1", "attempt", "1:", "ValueError:", "bad", "row"],
        ["missing", hour(2), hour(2), "1"],
        ["blocked", hour(3), hour(3), "1", "raw", f"{hour(3)}..{hour(3)}", "(missing)"],
    ]
    as_json = _lotline(
        backend_url, tmp_path, "gaps", "-n", hours.ns, "--dataset", "cleaned", "--json", *RANGE_5
    )
    document = json.loads(as_json.stdout)
    assert (document["totalLots"], document["totalRuns"], document["counts"]["blocked"]) == (5, 3, 1)
    # ``counts`` are the report's (an empty lot is complete), ``lots`` as the pages count them.
    assert (document["counts"]["complete"], document["lots"]["complete"], document["lots"]["empty"]) == (
        2,
        1,
        1,
    )
    assert document["publishedWithWarnings"] == 0
    failed = document["runs"][0]
    assert (failed["state"], failed["attempt"], failed["reason"]) == ("failed", 1, "ValueError: bad row")


def test_backfill_dry_run_then_for_real(hours: LotWorld, backend_url: str, tmp_path: Path) -> None:
    before = hours.table()
    dry = _lotline(backend_url, tmp_path, "backfill", "-n", hours.ns, "--job", "clean", "--dry-run", *RANGE)
    assert dry.returncode == 0, dry.stderr
    assert "dry run, nothing changed: would reopen 1 lots (0 more downstream) and hint 2" in dry.stdout
    assert hours.table() == before
    done = _lotline(
        backend_url,
        tmp_path,
        "backfill",
        "-n",
        hours.ns,
        "--job",
        "clean",
        "--only",
        "complete",
        "--json",
        *RANGE,
        process=True,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [r["from"] for r in document["reopened"]] == [hour(0)]
    assert [r["state"] for r in document["left"]] == ["failed", "missing", "blocked"]
    assert hours.status("cleaned", hour(0), "clean") == "RESUBMIT"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["gaps", "--job", "clean", "--from", "2023-01-02", "--to", "2023-01-01"], "must be before"),
        (["gaps", "--job", "nope", *RANGE], "nope"),
        (["gaps", "--job", "clean", "--from", "today", "--to", "2023-01-01"], "RFC 3339"),
        (["gaps", "--job", "clean", "--from", "2001-01-01", "--to", "2023-01-01"], "ten years"),
        (["backfill", "--job", "clean", "--only", "held", *RANGE], "cannot take 'held'"),
        (["backfill", "--job", "clean", "--from", "2023-01-02", "--to", "2023-01-01"], "must be before"),
    ],
)
def test_errors_are_one_line_and_change_nothing(
    hours: LotWorld, backend_url: str, tmp_path: Path, args: list[str], message: str
) -> None:
    before = hours.table()
    result = _lotline(backend_url, tmp_path, args[0], "-n", hours.ns, *args[1:])
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("lotline: error: ") and message in line
    assert hours.table() == before
