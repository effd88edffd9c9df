"""Runs through the service API (SPEC §2): creation, transitions with times, errors that change nothing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from lotline.domain.errors import Conflict, InvalidInput, NotFound
from lotline.domain.runs import RunAction, RunState
from lotline.services import Lineage
from support.world import World

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture
def world(lineage: Lineage) -> World:
    world = World(lineage)
    lineage.catalog.upsert_job(world.ns, "job")
    return world


def test_a_run_is_created_new_with_its_job_version(world: World, lineage: Lineage) -> None:
    run_id = uuid.uuid4()
    run = lineage.runs.create_run(world.ns, "job", run_id=run_id, args={"a": 1}, nominal_start_time=T0)
    assert (run.id, run.state, run.args, run.nominal_start_time) == (run_id, RunState.NEW, {"a": 1}, T0)
    assert run.job_version == lineage.catalog.get_job(world.ns, "job").current_version
    assert [t.state for t in run.transitions] == [RunState.NEW]


def test_transitions_are_recorded_with_their_times(world: World, lineage: Lineage) -> None:
    run = lineage.runs.create_run(world.ns, "job")
    lineage.runs.transition(run.id, RunAction.START, at=T0)
    done = lineage.runs.transition(run.id, RunAction.COMPLETE, at=T0 + timedelta(seconds=90))
    assert done.state is RunState.COMPLETED
    assert (done.started_at, done.ended_at, done.duration_ms) == (T0, T0 + timedelta(seconds=90), 90_000)
    assert [(t.state, t.at) for t in done.transitions[1:]] == [
        (RunState.RUNNING, T0),
        (RunState.COMPLETED, T0 + timedelta(seconds=90)),
    ]


@pytest.mark.parametrize(
    ("path", "final"),
    [
        ([RunAction.START, RunAction.COMPLETE], RunState.COMPLETED),
        ([RunAction.START, RunAction.FAIL], RunState.FAILED),
        ([RunAction.START, RunAction.ABORT], RunState.ABORTED),
        ([RunAction.ABORT], RunState.ABORTED),
    ],
)
def test_legal_paths(world: World, lineage: Lineage, path: list[RunAction], final: RunState) -> None:
    run = lineage.runs.create_run(world.ns, "job")
    for action in path:
        run = lineage.runs.transition(run.id, action)
    assert run.state is final
    assert [t.state for t in run.transitions][-1] is final


def test_repeating_the_last_transition_is_a_no_op(world: World, lineage: Lineage) -> None:
    run = lineage.runs.create_run(world.ns, "job")
    lineage.runs.transition(run.id, RunAction.START, at=T0)
    again = lineage.runs.transition(run.id, RunAction.START, at=T0 + timedelta(hours=1))
    assert (again.state, again.started_at, len(again.transitions)) == (RunState.RUNNING, T0, 2)
    lineage.runs.transition(run.id, RunAction.COMPLETE)
    final = lineage.runs.transition(run.id, RunAction.COMPLETE)
    assert (final.state, len(final.transitions)) == (RunState.COMPLETED, 3)


@pytest.mark.parametrize(
    ("setup", "illegal", "state"),
    [
        ([], RunAction.COMPLETE, "NEW"),
        ([], RunAction.FAIL, "NEW"),
        ([RunAction.START, RunAction.COMPLETE], RunAction.FAIL, "COMPLETED"),
        ([RunAction.START, RunAction.COMPLETE], RunAction.START, "COMPLETED"),
        ([RunAction.START, RunAction.FAIL], RunAction.COMPLETE, "FAILED"),
        ([RunAction.ABORT], RunAction.START, "ABORTED"),
    ],
)
def test_illegal_transitions_conflict_and_change_nothing(
    world: World, lineage: Lineage, setup: list[RunAction], illegal: RunAction, state: str
) -> None:
    run = lineage.runs.create_run(world.ns, "job")
    for action in setup:
        run = lineage.runs.transition(run.id, action)
    with pytest.raises(Conflict) as raised:
        lineage.runs.transition(run.id, illegal)
    assert raised.value.current == state
    assert f"is {state}" in raised.value.message
    assert lineage.runs.get_run(run.id) == run


def test_new_to_aborted_writes_no_versions(world: World, lineage: Lineage) -> None:
    lineage.catalog.upsert_dataset(world.ns, "out")
    lineage.catalog.upsert_job(world.ns, "job", outputs=[world.ref("out")])
    run = lineage.runs.create_run(world.ns, "job")
    aborted = lineage.runs.transition(run.id, RunAction.ABORT)
    assert aborted.state is RunState.ABORTED
    assert (aborted.started_at, aborted.outputs) == (None, ())
    assert world.versions("out") == {}


def test_unknown_run_job_and_parent_are_not_found(world: World, lineage: Lineage) -> None:
    with pytest.raises(NotFound, match="Run"):
        lineage.runs.transition(uuid.uuid4(), RunAction.START)
    with pytest.raises(NotFound, match="Job 'scenarios:nope' not found"):
        lineage.runs.create_run(world.ns, "nope")
    with pytest.raises(NotFound, match="Run"):
        lineage.runs.create_run(world.ns, "job", parent_run_id=uuid.uuid4())
    assert lineage.runs.list_runs(world.ns, "job").total_count == 0


def test_an_existing_run_id_conflicts(world: World, lineage: Lineage) -> None:
    run = lineage.runs.create_run(world.ns, "job")
    with pytest.raises(Conflict, match="already exists"):
        lineage.runs.create_run(world.ns, "job", run_id=run.id)
    assert lineage.runs.list_runs(world.ns, "job").total_count == 1


def test_bad_times_and_lots_are_rejected(world: World, lineage: Lineage) -> None:
    run = lineage.runs.create_run(world.ns, "job")
    with pytest.raises(InvalidInput, match="time zone"):
        lineage.runs.transition(run.id, RunAction.START, at=datetime(2026, 1, 1))
    with pytest.raises(InvalidInput):
        lineage.runs.create_run(world.ns, "job", lot="../etc")
    assert lineage.runs.get_run(run.id).state is RunState.NEW
    assert lineage.runs.list_runs(world.ns, "job").total_count == 1


def test_runs_are_listed_newest_first_with_paging(world: World, lineage: Lineage) -> None:
    ids = [lineage.runs.create_run(world.ns, "job").id for _ in range(5)]
    page = lineage.runs.list_runs(world.ns, "job", limit=2, offset=1)
    assert page.total_count == 5
    assert len(page.items) == 2
    everything = lineage.runs.list_runs(world.ns, "job").items
    assert {r.id for r in everything} == set(ids)
    assert [r.created_at for r in everything] == sorted((r.created_at for r in everything), reverse=True)
    with pytest.raises(InvalidInput, match="limit"):
        lineage.runs.list_runs(world.ns, "job", limit=0)


def test_parent_links(world: World, lineage: Lineage) -> None:
    parent = lineage.runs.create_run(world.ns, "job")
    child = lineage.runs.create_run(world.ns, "job")
    assert lineage.runs.link_parent(child.id, parent.id).parent_run_id == parent.id
    assert [r.id for r in lineage.runs.child_runs(parent.id)] == [child.id]
    with pytest.raises(InvalidInput, match="cycle"):
        lineage.runs.link_parent(parent.id, child.id)
    with pytest.raises(InvalidInput, match="own parent"):
        lineage.runs.link_parent(parent.id, parent.id)
    assert lineage.runs.get_run(parent.id).parent_run_id is None
    # Deeper chains too (one recursive query walks them): great-grandchild -> grandchild -> child.
    grandchild = lineage.runs.create_run(world.ns, "job")
    great = lineage.runs.create_run(world.ns, "job")
    lineage.runs.link_parent(grandchild.id, child.id)
    lineage.runs.link_parent(great.id, grandchild.id)
    with pytest.raises(InvalidInput, match="cycle"):
        lineage.runs.link_parent(parent.id, great.id)
    assert lineage.runs.get_run(parent.id).parent_run_id is None
