"""``lotline status | invalidate | hold | release`` against both databases, errors included."""

from __future__ import annotations

import datetime
import json

import pytest
from typer.testing import CliRunner

from lotline.cli.main import app
from support.lots import LotWorld


@pytest.fixture
def cli(backend_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> CliRunner:
    monkeypatch.setenv("LOTLINE_DB_URL", backend_url)
    monkeypatch.chdir(str(tmp_path))
    return CliRunner()


@pytest.fixture
def chain(world: LotWorld) -> LotWorld:
    world.job("JobA", output="DataA")
    world.job("JobB", inputs=["DataA"], output="DataB")
    world.produce("JobA", "1", "2", "3")
    claim = world.claim("JobB")
    assert claim is not None
    world.lots.complete(claim)
    failed = world.claim("JobB")
    assert failed is not None
    world.lots.fail(failed, error=ValueError("bad row 17\n  at line 3"))
    return world


def test_status_counts_lots_by_state(cli: CliRunner, chain: LotWorld) -> None:
    result = cli.invoke(app, ["status", "-n", chain.ns])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == [
        "JOB",
        "DATASET",
        "COMPLETE",
        "EMPTY",
        "STALE",
        "RUNNING",
        "PENDING",
        "FAILED",
        "BLOCKED",
        "MISSING",
        "HELD",
        "TOTAL",
    ]
    assert lines[1].split() == ["JobA", "DataA", "3", "0", "0", "0", "0", "0", "0", "0", "0", "3"]
    assert lines[2].split() == ["JobB", "DataB", "1", "0", "0", "0", "0", "1", "0", "0", "0", "2"]
    listed = cli.invoke(app, ["status", "-n", chain.ns, "--job", "JobB", "--lots"])
    assert [line.split() for line in listed.output.splitlines()[-3:]] == [
        ["DATASET", "LOT", "JOB", "STATE", "ATTEMPT", "OWNER", "REASON"],
        ["DataB", "1", "JobB", "complete", "1", "worker-1"],
        # A failed lot says why, in one line: its run's recorded reason.
        ["DataB", "2", "JobB", "failed", "1", "worker-1", "ValueError:", "bad", "row", "17"],
    ]


def test_status_lists_only_the_states_asked_for(cli: CliRunner, chain: LotWorld) -> None:
    """``--state failed,missing``: the lots in trouble, not every lot (issue 39.9)."""
    listed = cli.invoke(app, ["status", "-n", chain.ns, "--lots", "--state", "failed,missing"])
    assert listed.exit_code == 0, listed.output
    assert [line.split()[:4] for line in listed.output.splitlines()[-2:]] == [
        ["DATASET", "LOT", "JOB", "STATE"],
        ["DataB", "2", "JobB", "failed"],
    ]
    assert "COMPLETE" in listed.output.splitlines()[0] and "JobA" not in listed.output
    document = json.loads(cli.invoke(app, ["status", "-n", chain.ns, "--state", "complete", "--json"]).output)
    assert {(lot["dataset"], lot["lot"], lot["state"]) for lot in document["lots"]} == {
        ("DataA", "1", "complete"),
        ("DataA", "2", "complete"),
        ("DataA", "3", "complete"),
        ("DataB", "1", "complete"),
    }


def test_status_lots_names_the_lots_that_have_no_row(cli: CliRunner, world: LotWorld) -> None:
    """A missing hour, the hours since, and the day blocked on them have no row: ``--lots`` names
    them as the gap report's runs (what waits on what), and their counts are the table's."""
    day = datetime.datetime.now(datetime.UTC).date() - datetime.timedelta(days=2)
    world.job("land", output="hours")
    world.job("daily", inputs=["hours"], output="days", mapping="PT1H->P1D")
    world.produce("land", *(f"{day:%Y%m%d}PT1H{h:03d}" for h in (0, 1, 3)))
    listed = cli.invoke(app, ["status", "-n", world.ns, "--lots", "--state", "missing,blocked"])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert "DATASET  LOT" not in listed.output  # no row is missing or blocked: no table of rows
    at = lines.index(
        "lots with no row yet (never delivered or made, or not due), as `lotline gaps` lists them:"
    )
    runs = [line.split() for line in lines[at + 2 :]]
    hour = f"{day:%Y%m%d}PT1H"
    assert runs[0][:6] == ["hours", "missing", f"{hour}002", f"{hour}002", "1", "land"]
    assert runs[1][:3] == ["hours", "missing", f"{hour}004"]
    assert runs[2][:6] == ["days", "blocked", f"{day:%Y%m%d}P1D000", f"{day:%Y%m%d}P1D000", "1", "daily"]
    assert runs[2][6:] == ["hours", f"{hour}002..{hour}002", "(missing)"]
    document = json.loads(cli.invoke(app, ["status", "-n", world.ns, "--json"]).output)
    counted = {(j["dataset"], s): n for j in document["jobs"] for s, n in j["counts"].items()}
    for state in ("missing", "blocked"):
        named = [r for r in document["lotsWithoutRow"] if r["state"] == state]
        assert sum(r["count"] for r in named) == sum(n for (_, s), n in counted.items() if s == state)


def test_status_json(cli: CliRunner, chain: LotWorld) -> None:
    result = cli.invoke(app, ["status", "-n", chain.ns, "--dataset", "DataB", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["jobs"] == [{"job": "JobB", "dataset": "DataB", "counts": {"complete": 1, "failed": 1}}]
    assert [
        (lot["lot"], lot["state"], lot["status"], lot["attempt"], lot["error"]) for lot in document["lots"]
    ] == [
        ("1", "complete", "READY", 1, None),
        ("2", "failed", "ERROR", 1, "ValueError: bad row 17"),
    ]


def test_invalidate_hold_and_release(cli: CliRunner, chain: LotWorld) -> None:
    result = cli.invoke(app, ["invalidate", "-n", chain.ns, "DataA", "1"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["reopened DataA 1", "reopened DataB 1"]
    assert chain.status("DataB", "1", "JobB") == "RESUBMIT"
    assert cli.invoke(app, ["hold", "-n", chain.ns, "DataA", "3"]).output == "DataA 3 is now on hold\n"
    assert chain.status("DataA", "3", "JobA") == "HOLD"
    released = cli.invoke(app, ["release", "-n", chain.ns, "DataA", "3"]).output
    assert released == "DataA 3 released (complete)\n"
    assert cli.invoke(app, ["hold", "-n", chain.ns, "--job", "JobB"]).output == "job JobB is now on hold\n"
    assert chain.claim("JobB") is None
    assert cli.invoke(app, ["release", "-n", chain.ns, "--job", "JobB"]).exit_code == 0
    assert chain.claim("JobB") is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["status", "-n", "nowhere"], "Namespace 'nowhere' not found."),
        (["status", "-n", "lots", "--job", "nope"], "Job 'lots:nope' not found."),
        (["invalidate", "-n", "lots", "DataA", "9"], "has never been produced"),
        (["invalidate", "-n", "lots", "DataA", "bad/lot"], "contains '/'"),
        (["hold", "-n", "lots", "DataA"], "Name either DATASET LOT, or --job JOB."),
        (["hold", "-n", "lots", "DataA", "1", "--job", "JobA"], "Name either DATASET LOT, or --job JOB."),
        (["release", "-n", "lots", "DataA", "1"], "is not on hold"),
        (["release", "-n", "lots", "--job", "JobB"], "is not on hold"),
        (["status", "-n", "lots", "--state", "failed,broken"], "--state 'broken' is not one of complete,"),
    ],
)
def test_errors_are_one_line_and_change_nothing(
    cli: CliRunner, chain: LotWorld, args: list[str], message: str
) -> None:
    before = chain.table()
    result = cli.invoke(app, args)
    assert result.exit_code == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("lotline: error: ")
    assert message in line
    assert chain.table() == before


def test_status_counts_each_output_of_a_job_once(cli: CliRunner, world: LotWorld) -> None:
    """A job with two outputs has a row per output: each row's TOTAL is its own lots (issue 39.1)."""
    world.job("land", output="raw")
    world.lineage.catalog.upsert_dataset(world.ns, "left")
    world.lineage.catalog.upsert_dataset(world.ns, "right")
    world.lots.register_job(world.ns, "split", output=["left", "right"], inputs=["raw"])
    world.produce("land", "1", "2")
    world.produce("split", "1", "2")
    result = cli.invoke(app, ["status", "-n", world.ns, "--job", "split"])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines() if line.startswith("split")]
    assert [(r[1], r[-1]) for r in rows] == [("left", "2"), ("right", "2")]
