"""SPEC §3 rules beyond the seed's scenarios: rule 1, numbering after failures, pinning, lots."""

from __future__ import annotations

import pytest

from lotline.domain.errors import Conflict
from lotline.domain.runs import RunAction
from lotline.services import Lineage
from support.world import World


@pytest.fixture
def world(lineage: Lineage) -> World:
    return World(lineage)


def test_an_input_with_no_version_gets_v1_with_no_producing_run(world: World) -> None:
    world.declare("raw")
    assert world.versions("raw") == {}  # declaring creates no version
    world.run("JobA@Run1", "succeeds", consumes=["raw"])
    assert world.versions("raw") == {1: "current"}
    assert world.version("raw", 1).run_id is None
    world.run("JobA@Run2", "succeeds", consumes=["raw"])
    assert world.versions("raw") == {1: "current"}  # consuming again creates nothing


def test_numbering_continues_from_the_latest_version_after_a_failure(world: World) -> None:
    world.run("JobA@Run1", "succeeds", produces=["x"])
    world.run("JobA@Run2", "fails", produces=["x"])
    world.run("JobA@Run3", "aborts", produces=["x"])
    assert world.current("x") == 1
    world.run("JobA@Run4", "succeeds", produces=["x"])
    assert world.versions("x") == {1: "superseded", 2: "failed", 3: "failed", 4: "current"}
    assert world.current("x") == 4


def test_an_input_is_pinned_when_the_run_starts(world: World) -> None:
    world.run("JobA@Run1", "succeeds", produces=["x"])
    world.start("JobB@Run1", consumes=["x"], produces=["y"])
    world.run("JobA@Run2", "succeeds", produces=["x"])  # x moves to V2 while JobB runs
    world.finish("JobB@Run1", "succeeds")
    assert world.current("x") == 2
    assert world.consumed("JobB@Run1") == {"x": 1}


def test_inputs_reported_while_running_are_pinned_when_reported(world: World, lineage: Lineage) -> None:
    world.run("JobA@Run1", "succeeds", produces=["x"])
    run_id = world.start("JobB@Run1", produces=["y"])
    lineage.runs.record_inputs(run_id, [world.ref("x")])
    world.run("JobA@Run2", "succeeds", produces=["x"])
    world.finish("JobB@Run1", "succeeds")
    assert world.consumed("JobB@Run1") == {"x": 1}


def test_outputs_reported_by_a_dataset_write_get_their_version_at_the_end(
    world: World, lineage: Lineage
) -> None:
    run_id = world.start("JobA@Run1")
    lineage.catalog.upsert_dataset(world.ns, "written", run_id=run_id)  # PUT dataset with runId
    assert world.versions("written") == {}  # nothing is visible before the run ends
    world.finish("JobA@Run1", "fails")
    assert world.versions("written") == {1: "failed"}
    assert world.current("written") is None


def test_metadata_updates_without_a_run_create_no_version(world: World, lineage: Lineage) -> None:
    world.run("JobA@Run1", "succeeds", produces=["x"])
    lineage.catalog.upsert_dataset(world.ns, "x", description="now documented")
    assert world.versions("x") == {1: "current"}
    assert lineage.catalog.get_dataset(world.ns, "x").description == "now documented"


def test_last_modified_is_when_the_current_version_was_written(world: World, lineage: Lineage) -> None:
    world.declare("x")
    assert lineage.catalog.get_dataset(world.ns, "x").last_modified_at is None
    world.run("JobA@Run1", "succeeds", produces=["x"])
    written = world.version("x", 1).created_at
    world.run("JobA@Run2", "fails", produces=["x"])  # a failed write modifies nothing readable
    assert lineage.catalog.get_dataset(world.ns, "x").last_modified_at == written


def test_outputs_cannot_be_reported_after_the_run_ended(world: World, lineage: Lineage) -> None:
    run_id = world.run("JobA@Run1", "succeeds")
    with pytest.raises(Conflict, match="before it ends"):
        lineage.catalog.upsert_dataset(world.ns, "late", run_id=run_id)
    assert lineage.catalog.list_datasets(world.ns).total_count == 0  # the rejected call created nothing
    world.declare("late")
    with pytest.raises(Conflict):
        lineage.runs.record_outputs(run_id, [world.ref("late")])
    assert world.versions("late") == {}


def test_a_run_that_fails_without_declared_outputs_versions_nothing(world: World, lineage: Lineage) -> None:
    run_id = world.run("JobA@Run1", "fails", consumes=["x"])
    assert lineage.runs.get_run(run_id).outputs == ()
    assert world.versions("x") == {1: "current"}  # rule 1 applied to the input only


def test_lot_scoped_current_versions(world: World, lineage: Lineage) -> None:
    """Rule 7: each lot has its own current version; the dataset's is its latest successful one."""
    world.declare("events")
    lineage.catalog.upsert_job(world.ns, "ingest", outputs=[world.ref("events")])

    def ingest(lot: str, action: RunAction) -> None:
        run = lineage.runs.create_run(world.ns, "ingest", lot=lot)
        lineage.runs.transition(run.id, RunAction.START)
        lineage.runs.transition(run.id, action)

    ingest("2023-01-01", RunAction.COMPLETE)  # V1
    ingest("2023-01-02", RunAction.COMPLETE)  # V2
    ingest("2023-01-01", RunAction.FAIL)  # V3 failed: lot 01 stays at V1
    ingest("2023-01-01", RunAction.COMPLETE)  # V4 supersedes V1 only

    current = {
        lot: lineage.versions.current_version(world.ns, "events", lot) for lot in ("2023-01-01", "2023-01-02")
    }
    assert {lot: v.number if v else None for lot, v in current.items()} == {"2023-01-01": 4, "2023-01-02": 2}
    assert world.versions("events") == {1: "superseded", 2: "current", 3: "failed", 4: "current"}
    assert world.current("events") == 4
    lot_one = lineage.versions.list_versions(world.ns, "events", lot="2023-01-01")
    assert [(v.number, v.lot) for v in lot_one.items] == [
        (4, "2023-01-01"),
        (3, "2023-01-01"),
        (1, "2023-01-01"),
    ]
    assert lineage.versions.current_version(world.ns, "events", "2023-01-03") is None


def test_a_lot_scoped_input_pins_its_own_lot(world: World, lineage: Lineage) -> None:
    world.declare("events", "daily")
    lineage.catalog.upsert_job(world.ns, "ingest", outputs=[world.ref("events")])
    lineage.catalog.upsert_job(world.ns, "rollup", inputs=[world.ref("events")], outputs=[world.ref("daily")])
    for lot in ("2023-01-01", "2023-01-02"):
        run = lineage.runs.create_run(world.ns, "ingest", lot=lot)
        lineage.runs.transition(run.id, RunAction.START)
        lineage.runs.transition(run.id, RunAction.COMPLETE)
    rollup = lineage.runs.create_run(world.ns, "rollup", lot="2023-01-01")
    lineage.runs.transition(rollup.id, RunAction.START)
    done = lineage.runs.transition(rollup.id, RunAction.COMPLETE)
    assert [(io.dataset, io.lot, io.version_number) for io in done.inputs] == [("events", "2023-01-01", 1)]
    assert [(io.dataset, io.lot, io.version_number) for io in done.outputs] == [("daily", "2023-01-01", 1)]
