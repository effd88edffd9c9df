"""Stale lots (issue 40.3) on SQLite and PostgreSQL: when a job's version changes, the lots an
older version published are stale — complete and readable, marked with the version that made them
and the current one — in the gap report, every page's words and the REST/CLI JSON; ``backfill
--only stale`` remakes them as new versions and clears the mark; ``recompute_stale`` (a job
declared ``on_change="recompute"``) makes them eligible at once."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from lotline.api.app import create_app
from lotline.cli.main import app
from lotline.domain.errors import InvalidInput
from lotline.domain.gaps import GapState, report_json
from lotline.domain.grid import CellState
from lotline.services import Lineage
from lotline.services.config import Settings
from lotline.spark.pipeline import Pipeline, PipelineError
from lotline.spark.registration import register
from support.lots import LotWorld

DAY, NEXT_DAY = "2023-01-01", "2023-01-02"


def hour(n: int) -> str:
    return f"20230101PT1H{n:03d}"


def _version(world: LotWorld, digest: str) -> None:
    """Register clean as the runner does when its code is ``digest``."""
    world.lots.register_job(world.ns, "clean", output="cleaned", inputs=["raw"], code_digest=digest)


def _make(world: LotWorld, *lots: str) -> None:
    for lot in lots:
        claim = world.claim("clean", lot)
        assert claim is not None
        world.lots.complete(claim)


@pytest.fixture
def changed(world: LotWorld) -> LotWorld:
    """raw: hours 00-04 READY; cleaned 00-02 made by clean's version 1, then the code changed
    (version 2) and 03 made by it; 04 missing."""
    world.job("land", output="raw")
    world.lineage.catalog.upsert_dataset(world.ns, "cleaned")
    _version(world, "one")
    world.produce("land", *(hour(n) for n in range(5)))
    _make(world, hour(0), hour(1), hour(2))
    _version(world, "two")
    _make(world, hour(3))
    return world


def test_a_changed_job_marks_exactly_the_lots_its_old_version_made_stale(changed: LotWorld) -> None:
    gaps = changed.lineage.gaps
    report = gaps.report(changed.ns, job="clean", start=DAY, end="2023-01-01T05:00:00Z")
    assert (report.counts[GapState.STALE], report.counts[GapState.COMPLETE]) == (3, 1)
    stale = [r for r in report.runs if r.state is GapState.STALE]
    assert [(r.first, r.last, r.count) for r in stale] == [(hour(0), hour(2), 3)]
    assert stale[0].made is not None and stale[0].made.line == "made by version 1, now 2"
    shown = report_json(report)["runs"]
    assert isinstance(shown, list) and (shown[0]["madeByVersion"], shown[0]["currentVersion"]) == (1, 2)
    words = gaps.lot_states(changed.ns, "cleaned", [hour(2), hour(3), hour(4)])
    assert words == {hour(2): CellState.STALE, hour(3): CellState.COMPLETE, hour(4): CellState.MISSING}
    # The producer of raw never changed; registering clean's version 2 again changes nothing.
    assert (
        gaps.report(changed.ns, job="land", start=DAY, end="2023-01-01T05:00:00Z").counts[GapState.STALE] == 0
    )
    _version(changed, "two")
    again = gaps.report(changed.ns, job="clean", start=DAY, end="2023-01-01T05:00:00Z")
    assert again.counts == report.counts
    # Stale lots are readable: still READY, their versions current.
    assert changed.status("cleaned", hour(0), "clean") == "READY"
    grid = gaps.grid(changed.ns, job="clean", start=DAY, end="2023-01-01T05:00:00Z", resolution="lot")
    assert [c.state for c in grid.cells] == [CellState.STALE] * 3 + [CellState.COMPLETE, CellState.MISSING]


def test_going_back_to_an_older_version_makes_the_newer_ones_lots_stale(changed: LotWorld) -> None:
    _version(changed, "one")
    report = changed.lineage.gaps.report(changed.ns, job="clean", start=DAY, end="2023-01-01T05:00:00Z")
    stale = [r for r in report.runs if r.state is GapState.STALE]
    assert [(r.first, r.count) for r in stale] == [(hour(3), 1)]
    assert stale[0].made is not None and stale[0].made.line == "made by version 2, now 1"


def test_a_backfill_of_stale_lots_remakes_them_oldest_first_and_clears_the_mark(changed: LotWorld) -> None:
    gaps, before = changed.lineage.gaps, changed.table()
    made_by = {n: changed.current_version_run("cleaned", hour(n)) for n in range(4)}
    dry = gaps.backfill(changed.ns, "clean", start=DAY, end=NEXT_DAY, only=["stale"], dry_run=True)
    assert [(r.first, r.last, r.count) for r in dry.reopened] == [(hour(0), hour(2), 3)]
    assert changed.table() == before  # a dry run changes nothing

    with pytest.raises(InvalidInput, match="backfill cannot take 'fresh' lots; choose among"):
        gaps.backfill(changed.ns, "clean", start=DAY, end=NEXT_DAY, only=["stale,fresh"])
    assert changed.table() == before  # refused: nothing reopened

    done = gaps.backfill(changed.ns, "clean", start=DAY, end=NEXT_DAY, only=["stale"])
    assert [(r.first, r.last, r.count) for r in done.reopened] == [(hour(0), hour(2), 3)]
    assert done.hinted == []  # only stale: the missing hour 04 is left
    assert changed.status("cleaned", hour(3), "clean") == "READY"  # made by the current version
    taken = []
    while (claim := changed.claim("clean")) is not None and claim.lot != hour(4):
        taken.append(claim.lot)
        changed.lots.complete(claim)
    assert taken == [hour(0), hour(1), hour(2)]  # oldest first
    report = gaps.report(changed.ns, job="clean", start=DAY, end="2023-01-01T04:00:00Z")
    assert (report.counts[GapState.STALE], report.counts[GapState.COMPLETE]) == (0, 4)
    remade = {n: changed.current_version_run("cleaned", hour(n)) for n in range(4)}
    assert all(remade[n] != made_by[n] for n in range(3)) and remade[3] == made_by[3]  # new versions


def test_complete_without_stale_leaves_the_stale_lots(changed: LotWorld) -> None:
    done = changed.lineage.gaps.backfill(
        changed.ns, "clean", start=DAY, end=NEXT_DAY, only=["complete"], dry_run=True
    )
    assert [(r.first, r.count) for r in done.reopened] == [(hour(3), 1)]
    assert [r.state for r in done.left if r.state is GapState.STALE] == [GapState.STALE]


def test_recompute_makes_the_stale_lots_eligible_at_once(changed: LotWorld) -> None:
    gaps = changed.lineage.gaps
    assert gaps.recompute_stale(changed.ns, "land") == 0  # nothing stale: nothing changes
    assert gaps.recompute_stale(changed.ns, "clean") == 3
    claim = changed.claim("clean")
    assert claim is not None and claim.lot == hour(0)
    report = gaps.report(changed.ns, job="clean", start=DAY, end="2023-01-01T05:00:00Z")
    assert report.counts[GapState.STALE] == 0 and report.counts[GapState.RUNNING] == 1


def test_named_lots_made_by_an_older_version_are_stale(world: LotWorld) -> None:
    world.job("land", output="raw")
    world.lineage.catalog.upsert_dataset(world.ns, "cleaned")
    _version(world, "one")
    world.produce("land", "2023-01-01", "2023-01-02")
    _make(world, "2023-01-01")
    _version(world, "two")
    _make(world, "2023-01-02")
    report = world.lineage.gaps.report(world.ns, job="clean")
    assert (report.counts[GapState.STALE], report.counts[GapState.COMPLETE], report.total) == (1, 1, 2)
    assert [(r.state, r.first) for r in report.runs] == [(GapState.STALE, "2023-01-01")]
    words = world.lineage.gaps.lot_states(world.ns, "cleaned", ["2023-01-01", "2023-01-02"])
    assert words == {"2023-01-01": CellState.STALE, "2023-01-02": CellState.COMPLETE}


def test_versions_number_in_the_order_they_came_on_a_clock_that_stands_still(timed_world: LotWorld) -> None:
    """A test's clock that never moves records every version at the same instant: they still
    number 1, 2, 3 in the order they came, not by their ids."""
    world = timed_world
    world.job("land", output="raw")
    world.lineage.catalog.upsert_dataset(world.ns, "cleaned")
    world.produce("land", hour(0))
    for digest in ("one", "two"):
        _version(world, digest)
    _make(world, hour(0))
    _version(world, "three")
    [stale] = world.lineage.gaps.report(world.ns, job="clean", start=DAY, end="2023-01-01T01:00:00Z").runs
    assert stale.made is not None and stale.made.line == "made by version 2, now 3"


def _cleaned_v1(raw: Any) -> Any:
    return raw


def _cleaned_v2(raw: Any) -> Any:
    return raw.limit(1)


def _pipeline(transform: Callable[..., Any], on_change: str) -> Pipeline:
    pipeline = Pipeline("changing")
    raw = pipeline.dataset("raw", format="csv", interval="PT1H")
    cleaned = pipeline.dataset("cleaned", format="parquet", interval="PT1H")
    pipeline.job(inputs=[raw], output=cleaned, name="clean", on_change=on_change)(transform)
    return pipeline


def test_on_change_recompute_makes_the_stale_lots_eligible_when_the_runner_registers(
    lineage: Lineage,
) -> None:
    """What the runner registers (``spark.registration.register``, no Spark needed): the flag default
    leaves the old version's lots stale, ``on_change="recompute"`` reopens them at once."""
    world = LotWorld(lineage, "changing")
    world.job("ingest:raw", output="raw")
    world.produce("ingest:raw", hour(0), hour(1))
    register(lineage, _pipeline(_cleaned_v1, "flag"))
    _make(world, hour(0), hour(1))
    register(lineage, _pipeline(_cleaned_v2, "flag"))
    assert lineage.gaps.stale("changing", "clean")[0][0].count == 2  # flagged, left as they are
    assert world.claim("clean") is None
    register(lineage, _pipeline(_cleaned_v2, "recompute"))  # the same version: recompute them now
    assert lineage.gaps.stale("changing", "clean") == ([], None)
    claim = world.claim("clean")
    assert claim is not None and claim.lot == hour(0)


def test_an_unknown_on_change_is_refused_at_load() -> None:
    with pytest.raises(
        PipelineError, match=r"job clean: on_change='restate' is not one of 'flag', 'recompute'\."
    ):
        _pipeline(_cleaned_v1, "restate")


def test_gaps_status_and_the_rest_api_say_stale(
    changed: LotWorld, backend_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The command line and the REST gap report in the same words: `lotline gaps` lists the stale
    run with its versions, `lotline status --state stale` lists exactly those lots, and
    `backfill --only` refuses a state it cannot take in one line, changing nothing."""
    monkeypatch.setenv("LOTLINE_DB_URL", backend_url)
    monkeypatch.chdir(tmp_path)
    cli, ns, span = CliRunner(), ["-n", changed.ns], ["--from", DAY, "--to", "2023-01-01T05:00:00Z"]
    gaps = cli.invoke(app, ["gaps", *ns, "--job", "clean", *span])
    assert gaps.exit_code == 0, gaps.output
    assert gaps.output.splitlines()[1].split()[:6] == ["complete", "1", "empty", "0", "stale", "3"]
    assert [line.split() for line in gaps.output.splitlines() if line.startswith("stale")] == [
        ["stale", hour(0), hour(2), "3", "made", "by", "version", "1,", "now", "2"]
    ]
    listed = json.loads(
        cli.invoke(app, ["status", *ns, "--job", "clean", "--state", "stale", "--json"]).stdout
    )
    assert [r["lot"] for r in listed["lots"]] == [hour(0), hour(1), hour(2)]
    before = changed.table()
    refused = cli.invoke(app, ["backfill", *ns, "--job", "clean", *span, "--only", "stale,fresh"])
    assert refused.exit_code == 2 and "backfill cannot take 'fresh' lots" in refused.output
    assert changed.table() == before

    api = create_app(Settings(db_url=backend_url, warehouse=str(tmp_path / "w"), api_token=None))
    api.state.lineage = changed.lineage
    client = TestClient(api, base_url="http://127.0.0.1")
    body = client.get(
        f"/api/v1/namespaces/{changed.ns}/jobs/clean/gaps", params={"from": DAY, "to": "2023-01-01T05:00:00Z"}
    ).json()
    assert body["counts"]["stale"] == 3
    [stale] = [r for r in body["runs"] if r["state"] == "stale"]
    assert (stale["from"], stale["count"], stale["madeByVersion"], stale["currentVersion"]) == (
        hour(0),
        3,
        1,
        2,
    )
