"""Concurrency, proven with separate processes that each hold their own database connection."""

from __future__ import annotations

from lotline.domain.runs import RunAction, RunState
from lotline.services import Lineage
from support.processes import separate_processes
from support.workers import transition_run
from support.world import World

#: As many processes as the racing test's: enough to interleave on two cores, not a soak.
WRITERS = 8


def _run_all(url: str, work: list[tuple[str, str]]) -> list[str]:
    context = separate_processes()
    barrier = context.Manager().Barrier(len(work))
    with context.Pool(len(work)) as pool:
        return pool.starmap(transition_run, [(url, run_id, action, barrier) for run_id, action in work])


def test_processes_completing_runs_on_one_dataset_at_once_get_consecutive_versions(
    lineage: Lineage, backend_url: str
) -> None:
    world = World(lineage)
    run_ids = [world.start(f"writer@Run{i}", produces=["shared"]) for i in range(WRITERS)]

    outcomes = _run_all(backend_url, [(str(r), RunAction.COMPLETE.value) for r in run_ids])

    assert outcomes == [RunState.COMPLETED.value] * WRITERS
    numbers = [lineage.runs.get_run(r).outputs[0].version_number for r in run_ids]
    assert sorted(n for n in numbers if n is not None) == list(range(1, WRITERS + 1))  # distinct, none lost
    versions = world.versions("shared")
    assert sorted(versions) == list(range(1, WRITERS + 1))
    assert [n for n, state in versions.items() if state == "current"] == [WRITERS]
    assert world.current("shared") == WRITERS
    assert {state for n, state in versions.items() if n != WRITERS} == {"superseded"}


def test_racing_transitions_of_one_run_have_exactly_one_winner(lineage: Lineage, backend_url: str) -> None:
    world = World(lineage)
    run_id = str(world.start("racer@Run1", produces=["out"]))
    actions = [RunAction.COMPLETE.value, RunAction.FAIL.value] * 4

    outcomes = _run_all(backend_url, [(run_id, a) for a in actions])

    final = lineage.runs.get_run(world.run_ids["racer@Run1"])
    assert final.state in (RunState.COMPLETED, RunState.FAILED)
    winners_action = RunAction.COMPLETE.value if final.state is RunState.COMPLETED else RunAction.FAIL.value
    for action, outcome in zip(actions, outcomes, strict=True):
        # the winner's action (and its idempotent repeats) report the final state; the rest conflict
        assert outcome == (final.state.value if action == winners_action else "conflict")
    assert len(world.versions("out")) == 1  # exactly one output version, whoever won
    assert [t.state for t in final.transitions] == [RunState.NEW, RunState.RUNNING, final.state]
