"""The OpenLineage journal and its projector, on both databases: accepted events change nothing
until projected; projection keeps each run's order, applies each event once, records and skips
what cannot be applied, and several projecting processes never apply an event twice."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from lotline.domain.clock import ManualClock
from lotline.domain.errors import InvalidInput, NotFound
from lotline.domain.openlineage import run_uuid
from lotline.domain.runs import RunState
from lotline.server.projector import BackgroundProjector
from lotline.services import Lineage
from lotline.services.projection import Drained, ProjectionService
from lotline.store.queries import events
from support.ol import run_event, run_history, step_facet
from support.polling import wait_until
from support.processes import separate_processes
from support.workers import drain_journal

NS = "journal"


def _run(lineage: Lineage, run_id: str) -> object:
    return lineage.runs.get_run(run_uuid(run_id))


def test_accepted_events_wait_in_the_journal_and_apply_in_the_order_received(lineage: Lineage) -> None:
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    a, b = run_history(NS, "a", first, steps=3), run_history(NS, "b", second, steps=3)
    interleaved = [e for pair in zip(a, b, strict=True) for e in pair]
    assert lineage.openlineage.accept_batch(interleaved).fresh == len(interleaved)

    assert lineage.projection.status().pending == len(interleaved)
    with pytest.raises(NotFound):
        lineage.runs.get_run(run_uuid(first))  # journaled, not projected yet

    # A group reads its events a page at a time (the default page is 100 events).
    drained = ProjectionService(lineage.store, pending_page=3).drain()
    assert list(drained.applied) == sorted(drained.applied)  # journal order
    assert (len(drained.applied), drained.failed) == (len(interleaved), ())
    for run_id in (first, second):
        run = lineage.runs.get_run(run_uuid(run_id))
        assert run.state is RunState.COMPLETED  # the late FAIL came after COMPLETE
        assert run.facets["step"]["n"] == 3  # the last step's facet, not an earlier one
        assert [t.state for t in run.transitions] == [RunState.NEW, RunState.RUNNING, RunState.COMPLETED]
        assert [o.version_number for o in run.outputs] == [1]
    status = lineage.projection.status()
    assert (status.pending, status.failed, status.last_applied_id) == (0, 0, max(drained.applied))


def test_repeated_events_are_journaled_once_and_applied_once(lineage: Lineage) -> None:
    run_id = str(uuid.uuid4())
    start, complete, _ = run_history(NS, "job", run_id, steps=0)
    assert lineage.openlineage.accept(start) is True
    assert lineage.openlineage.accept(start) is False
    accepted = lineage.openlineage.accept_batch([complete, start, complete])
    assert (accepted.fresh, accepted.duplicates, accepted.refused) == (1, 2, ())
    assert len(lineage.projection.drain().applied) == 2
    run = lineage.runs.get_run(run_uuid(run_id))
    assert run.state is RunState.COMPLETED
    # The same event again after projection: stored once, nothing to apply.
    assert lineage.openlineage.accept(complete) is False
    assert lineage.projection.drain().applied == ()
    assert lineage.openlineage.list_events().total_count == 2


def test_bad_events_are_refused_before_the_journal(lineage: Lineage) -> None:
    good = run_event(NS, "job", str(uuid.uuid4()), "START")
    with pytest.raises(InvalidInput):
        lineage.openlineage.accept({**good, "eventTime": "yesterday"})
    accepted = lineage.openlineage.accept_batch([good, {**good, "eventType": "EXPLODE"}, "nope"])
    assert (accepted.fresh, [i for i, _ in accepted.refused]) == (1, [1, 2])
    assert lineage.projection.status().pending == 1


def test_an_event_that_cannot_be_applied_is_recorded_and_skipped(lineage: Lineage) -> None:
    run_id = str(uuid.uuid4())
    journal = [
        run_event(NS, "owner", run_id, "START"),
        # The same run under another job, naming a new namespace and dataset: refused as a whole.
        run_event("elsewhere", "thief", run_id, "COMPLETE", second=1, outputs=("loot",)),
        # The next events of the group still apply, and may create what the refused one named.
        run_event("elsewhere", "honest", str(uuid.uuid4()), "START", inputs=("loot",)),
        run_event(NS, "owner", run_id, "COMPLETE", second=2, outputs=("out",)),
    ]
    lineage.openlineage.accept_batch(journal)
    groups: list[Drained] = []

    # One group, reading its events one page at a time (the refused one is on the second page).
    drained = ProjectionService(lineage.store, pending_page=1).drain(on_group=groups.append)

    assert [(len(g.applied), len(g.failed)) for g in groups if g.applied or g.failed] == [(3, 1)]
    assert (len(drained.applied), len(drained.failed)) == (3, 1)
    assert list(drained.applied) == sorted(drained.applied) and drained.failed[0] == min(drained.applied) + 1
    [(failed_id, reason)] = lineage.projection.failures()
    assert failed_id == drained.failed[0]
    assert "belongs to another job" in reason
    with pytest.raises(NotFound):
        lineage.catalog.get_job("elsewhere", "thief")  # nothing of the refused event was kept
    assert lineage.catalog.get_dataset("elsewhere", "loot").name == "loot"
    assert lineage.runs.get_run(run_uuid(run_id)).state is RunState.COMPLETED
    status = lineage.projection.status()
    assert (status.pending, status.failed) == (0, 1)
    assert lineage.projection.drain().failed == ()  # a failed event is not tried again


def test_a_bounded_or_stopped_drain_leaves_the_rest_pending_and_consistent(lineage: Lineage) -> None:
    run_ids = [str(uuid.uuid4()) for _ in range(4)]
    for i, run_id in enumerate(run_ids):
        lineage.openlineage.accept_batch(run_history(NS, f"job{i}", run_id, steps=1))
    total = lineage.projection.status().pending
    small = ProjectionService(lineage.store, group_size=3)

    assert len(small.drain(max_events=5).applied) == 5
    groups = 0

    def after_one_group() -> bool:
        nonlocal groups
        groups += 1
        return groups > 2  # checked before the group and once more after taking the lock

    assert len(small.drain(should_stop=after_one_group).applied) == 3
    assert lineage.projection.status().pending == total - 8
    lineage.projection.drain()
    assert [lineage.runs.get_run(run_uuid(r)).state for r in run_ids] == [RunState.COMPLETED] * 4


def test_stopping_the_background_projector_leaves_the_backlog_for_the_next_start(lineage: Lineage) -> None:
    run_id = str(uuid.uuid4())
    lineage.openlineage.accept_batch(run_history(NS, "job", run_id, steps=2))
    projector = BackgroundProjector(lineage.store, lineage.projection, poll_seconds=0.05)
    with lineage.store.write() as connection:  # another projector holds the lock ...
        assert events.lock_projection(connection, wait=True)
        projector.start()
        projector.request_stop()  # ... while this one is asked to stop
    projector.stop()
    assert lineage.projection.status().pending == 5  # still pending: not lost, not half-applied

    restarted = BackgroundProjector(lineage.store, lineage.projection, poll_seconds=0.05)
    restarted.start()
    try:
        assert restarted.wait_idle(timeout=60)
    finally:
        restarted.stop()
    assert lineage.projection.status().pending == 0
    assert lineage.runs.get_run(run_uuid(run_id)).state is RunState.COMPLETED


class _BusyServer:
    """The projector's ``server_busy``: answers ``busy`` and counts how often it was asked (each
    question is a decision to stand aside or to project), so a test waits for decisions, not time."""

    def __init__(self) -> None:
        self.busy = True
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.busy

    def wait_for_decisions(self, count: int) -> None:
        """Until the projector has asked ``count`` more times from now."""
        target = self.asked + count
        wait_until(lambda: self.asked >= target, timeout=30, what=f"{count} looks at the server")


def _wait_until_projected(lineage: Lineage) -> None:
    wait_until(lambda: lineage.projection.status().pending == 0, timeout=30, what="the backlog projected")


def test_the_projector_stands_aside_while_the_server_is_busy_and_resumes_when_it_is_not(
    lineage: Lineage,
) -> None:
    server = _BusyServer()
    projector = BackgroundProjector(
        lineage.store, lineage.projection, 0.05, server_busy=server, max_defer_seconds=600
    )
    projector.start()
    try:
        lineage.openlineage.accept_batch(run_history(NS, "job", str(uuid.uuid4()), steps=0))
        projector.wake()
        server.wait_for_decisions(5)
        assert lineage.projection.status().pending == 3  # woken, but standing aside
        server.busy = False
        _wait_until_projected(lineage)  # the server has room: projected long before 600 s
    finally:
        projector.stop()


def test_a_projector_standing_aside_still_projects_once_its_limit_has_passed(lineage: Lineage) -> None:
    """A server that stays busy does not stop projection for ever: on the projector's own clock
    (injected here, advanced by the test), it stands aside until ``max_defer_seconds`` passed."""
    lineage.openlineage.accept_batch(run_history(NS, "job", str(uuid.uuid4()), steps=0))
    clock = ManualClock()
    server = _BusyServer()
    projector = BackgroundProjector(
        lineage.store,
        lineage.projection,
        0.05,
        server_busy=server,
        max_defer_seconds=60.0,
        clock=clock,
    )
    projector.start()
    try:
        projector.wake()
        server.wait_for_decisions(5)  # many looks at the busy server, none long enough
        assert lineage.projection.status().pending == 3  # standing aside: 59 s of its clock left
        clock.advance(timedelta(seconds=59))
        projector.wake()
        server.wait_for_decisions(3)
        assert lineage.projection.status().pending == 3
        clock.advance(timedelta(seconds=1))  # the limit has passed
        _wait_until_projected(lineage)
    finally:
        projector.stop()


def test_processes_draining_at_once_apply_every_event_exactly_once(
    lineage: Lineage, backend_url: str
) -> None:
    run_ids = [str(uuid.uuid4()) for _ in range(6)]
    for i, run_id in enumerate(run_ids):
        lineage.openlineage.accept_batch(run_history(NS, f"job{i % 2}", run_id, steps=2))
    journaled = lineage.projection.status().pending
    context = separate_processes()
    workers = 3
    barrier = context.Manager().Barrier(workers)
    with context.Pool(workers) as pool:
        results = pool.starmap(drain_journal, [(backend_url, 2, barrier)] * workers)

    applied = [event_id for result in results for event_id in result]
    assert len(applied) == len(set(applied)) == journaled  # none twice, none left out
    assert lineage.projection.status().pending == 0
    for run_id in run_ids:
        run = lineage.runs.get_run(run_uuid(run_id))
        assert (run.state, run.facets["step"]["n"]) == (RunState.COMPLETED, 2)
    # Both jobs' runs wrote their output in turn: versions 1..3 each.
    for job in ("job0", "job1"):
        versions = lineage.versions.list_versions(NS, f"{job}-out")
        assert sorted(v.number for v in versions.items) == [1, 2, 3]


def test_catch_up_applies_what_came_before_it_and_says_what_is_left(lineage: Lineage) -> None:
    assert lineage.projection.catch_up(seconds=5) == 0  # nothing pending: one look, nothing to do
    run_id = str(uuid.uuid4())
    lineage.openlineage.accept_batch(run_history(NS, "job", run_id, steps=1))
    assert lineage.projection.catch_up(seconds=0) == 4  # no time at all: all of it still pending
    assert lineage.projection.catch_up(seconds=60, most=3) == 4  # more than a read applies: only counted
    assert lineage.projection.backlog() == 4
    assert lineage.projection.catch_up(seconds=60, most=4) == 0  # no more than it applies: applied
    assert lineage.runs.get_run(run_uuid(run_id)).state is RunState.COMPLETED
    lineage.openlineage.accept_batch(run_history(NS, "job", str(uuid.uuid4()), steps=1))
    assert lineage.projection.catch_up(seconds=60) == 0
    assert lineage.runs.get_run(run_uuid(run_id)).state is RunState.COMPLETED


def _at(second: int) -> datetime:
    return datetime(2026, 1, 1, 0, second // 60, second % 60, tzinfo=UTC)


@pytest.mark.parametrize(
    ("event_type", "state", "history"),
    [
        ("START", RunState.RUNNING, [RunState.NEW, RunState.RUNNING]),
        ("RUNNING", RunState.RUNNING, [RunState.NEW, RunState.RUNNING]),
        ("COMPLETE", RunState.COMPLETED, [RunState.NEW, RunState.RUNNING, RunState.COMPLETED]),
        ("FAIL", RunState.FAILED, [RunState.NEW, RunState.RUNNING, RunState.FAILED]),
        ("OTHER", RunState.NEW, [RunState.NEW]),
    ],
)
def test_the_first_event_of_an_unknown_run_creates_it_in_the_state_the_event_implies(
    lineage: Lineage, event_type: str, state: RunState, history: list[RunState]
) -> None:
    run_id = str(uuid.uuid4())
    job = f"first-{event_type.lower()}"
    facets = step_facet(7)
    lineage.openlineage.accept(
        run_event(NS, job, run_id, event_type, second=5, inputs=("src",), outputs=("dst",), facets=facets)
    )
    assert lineage.projection.drain().failed == ()

    run = lineage.runs.get_run(run_uuid(run_id))
    assert run.state is state
    assert [t.state for t in run.transitions] == history
    assert [t.at for t in run.transitions[1:]] == [_at(5)] * (len(history) - 1)  # the event's time
    times = [t.at for t in run.transitions]
    assert times == sorted(times)  # issue 29.12: NEW is never stamped after the start
    assert run.started_at == (_at(5) if state is not RunState.NEW else None)
    assert run.ended_at == (_at(5) if state.is_terminal else None)
    assert run.facets["step"] == facets["step"]
    [read], [written] = run.inputs, run.outputs
    # A started run's input is pinned (to V1: it had no version); a NEW one's waits for the start.
    assert read.version_number == (None if state is RunState.NEW else 1)
    # Only an ended run versions its output; only an ended run has a job version (from its I/O).
    assert written.version_number == (1 if state.is_terminal else None)
    current = lineage.catalog.get_job(NS, job).current_version
    assert run.job_version == (current if state.is_terminal else None)
    assert (current is not None) is state.is_terminal


def test_a_terminal_event_for_a_run_created_by_rest_starts_ends_and_versions_it(lineage: Lineage) -> None:
    lineage.catalog.upsert_namespace(NS)
    lineage.catalog.upsert_job(NS, "rest-made")
    created = lineage.runs.create_run(NS, "rest-made")
    declared = lineage.catalog.get_job(NS, "rest-made").current_version
    assert created.job_version == declared

    lineage.openlineage.accept(run_event(NS, "rest-made", str(created.id), "COMPLETE", outputs=("made",)))
    assert lineage.projection.drain().failed == ()

    run = lineage.runs.get_run(created.id)
    assert [t.state for t in run.transitions] == [RunState.NEW, RunState.RUNNING, RunState.COMPLETED]
    current = lineage.catalog.get_job(NS, "rest-made").current_version
    assert current not in (None, declared)  # the event reported an output: a new job version
    assert run.job_version == current
    assert [o.version_number for o in run.outputs] == [1]
