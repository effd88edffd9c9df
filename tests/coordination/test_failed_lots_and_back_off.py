"""Failures are pushed and backed off in the database (issue 27 §4), on SQLite and PostgreSQL:
a FAILED lot event in the failure's transaction, with job, attempt, run and the one-line reason; a
failed lot is retried only after its back-off, shared by every worker, and at once when an input
lot gets a new version."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lotline.domain.clock import ManualClock
from lotline.domain.coordination import LotClaim
from lotline.domain.errors import Conflict
from lotline.domain.manifests import LotEventKind
from lotline.domain.runs import RunState
from lotline.services import Lineage
from support.lots import LotWorld
from support.processes import separate_processes
from support.workers import fail_every_claim

LOT = "20230101PT5M050"


def _world(world: LotWorld) -> LotWorld:
    world.job("ingest", output="raw")
    world.job("parse", output="hits", inputs=["raw"])
    world.produce("ingest", LOT)
    return world


def _next(world: LotWorld, worker: str = "worker-1") -> LotClaim | None:
    return world.lots.claim(worker, world.ns, "parse")


def test_a_failure_appends_a_failed_event_with_its_reason(world: LotWorld) -> None:
    lineage = _world(world).lineage
    start = lineage.lot_events.last_position()
    claim = _next(world)
    assert claim is not None
    lineage.lots.fail(claim, error="[MALFORMED_RECORD_IN_PARSING] bad.csv")

    [event] = lineage.lot_events.after(start)
    assert event.kind is LotEventKind.FAILED
    assert (event.dataset, event.lot, event.job, event.attempt, event.run_id) == (
        "hits",
        LOT,
        "parse",
        1,
        claim.run_id,
    )
    assert event.reason == "[MALFORMED_RECORD_IN_PARSING] bad.csv"
    shown = event.to_json()
    assert (shown["kind"], shown["job"], shown["attempt"], shown["reason"]) == (
        "FAILED",
        "parse",
        1,
        "[MALFORMED_RECORD_IN_PARSING] bad.csv",
    )
    assert lineage.lot_events.after(start, namespace=world.ns, datasets=["raw"]) == []
    # The event is read like the others, also one lot at a time.
    assert lineage.lot_events.of_lot(world.ns, "hits", LOT) == [event]


def test_a_failure_without_a_message_has_an_event_without_a_reason(world: LotWorld) -> None:
    lineage = _world(world).lineage
    start = lineage.lot_events.last_position()
    claim = _next(world)
    assert claim is not None
    lineage.lots.fail(claim)
    [event] = lineage.lot_events.after(start)
    assert (event.kind, event.attempt, event.reason) == (LotEventKind.FAILED, 1, None)


def test_a_late_failure_writes_no_event(timed_world: LotWorld, clock: ManualClock) -> None:
    world = _world(timed_world)
    lineage = world.lineage
    claim = _next(world)
    assert claim is not None
    start = lineage.lot_events.last_position()
    clock.advance(timedelta(minutes=5))  # the lease ran out: the claim is not live any more
    with pytest.raises(Conflict):
        lineage.lots.fail(claim, error="too late")
    assert lineage.lot_events.after(start) == []


def _patient(lineage: Lineage, clock: ManualClock) -> LotWorld:
    """A timed world that gives up on a lot only after ten failures in a row (test_retries_end.py)."""
    return _world(LotWorld(Lineage.over(lineage.store, lineage.storage, clock=clock, max_attempts=10)))


def test_a_failed_lot_waits_out_its_back_off_doubling(lineage: Lineage, clock: ManualClock) -> None:
    world = _patient(lineage, clock)
    lots = world.lots
    claim = _next(world)
    assert claim is not None and claim.failures == 0
    lots.fail(claim, error="boom")
    for wait in (10, 20, 40):
        assert _next(world) is None  # backing off: no worker takes it
        assert _next(world, "worker-2") is None
        clock.advance(timedelta(seconds=wait - 1))
        assert _next(world) is None
        clock.advance(timedelta(seconds=1))
        retry = _next(world)
        assert retry is not None and retry.lot == LOT
        lots.fail(retry, error="boom again")
    statuses = lots.status(world.ns, job="parse")
    assert [(s.lot, s.status.value, s.attempt) for s in statuses] == [(LOT, "ERROR", 4)]


def test_a_new_input_version_retries_a_failed_lot_at_once(lineage: Lineage, clock: ManualClock) -> None:
    world = _patient(lineage, clock)
    lots = world.lots
    for _ in range(3):  # three failures in a row: the next try would wait 40 s
        claim = _next(world)
        assert claim is not None
        lots.fail(claim, error="malformed")
        clock.advance(timedelta(minutes=10))
    claim = _next(world)
    assert claim is not None and claim.failures == 3
    lots.fail(claim, error="malformed")
    assert _next(world) is None

    # The sender fixes the file: the input lot is reopened and published again.
    lots.invalidate(world.ns, "raw", LOT)
    world.produce("ingest", LOT)
    fixed = _next(world)
    assert fixed is not None and fixed.lot == LOT and fixed.attempt == 5
    assert fixed.failures == 0  # the count starts again: a failure now waits 10 s, not 80 s
    lots.fail(fixed, error="still malformed")
    clock.advance(timedelta(seconds=10))
    assert _next(world) is not None


def test_a_named_claim_does_not_wait(timed_world: LotWorld, clock: ManualClock) -> None:
    world = _world(timed_world)
    lots = world.lots
    claim = _next(world)
    assert claim is not None
    lots.fail(claim, error="boom")
    assert _next(world) is None
    named = world.claim("parse", LOT)  # an operator (or `lotline run`) asks for this lot
    assert named is not None and named.attempt == 2
    lots.fail(named, error="boom")
    assert _next(world) is None


def test_the_database_claim_path_honours_the_back_off(lineage: Lineage) -> None:
    """With the system clock (on PostgreSQL: the claim functions), a failed lot is not taken again
    at once, by any worker, and a new input version makes it due at once."""
    world = _world(LotWorld(lineage))
    lots = world.lots
    claim = _next(world)
    assert claim is not None
    lots.fail(claim, error="boom")
    assert _next(world) is None
    assert _next(world, "worker-2") is None
    lots.invalidate(world.ns, "raw", LOT)
    world.produce("ingest", LOT)
    again = _next(world, "worker-2")
    assert again is not None and (again.lot, again.attempt, again.failures) == (LOT, 2, 0)
    lots.complete(again)


def test_two_worker_processes_fail_a_broken_lot_once_per_back_off(
    timed_world: LotWorld, clock: ManualClock, backend_url: str
) -> None:
    """Two worker processes whose every lot fails, each trying 20 claims at a time: one FAILED run
    per back-off, not one per worker; after a new input version, the lot is taken at once."""
    world = _world(timed_world)
    start = clock.now()
    context = separate_processes()
    with context.Manager() as manager, context.Pool(2) as pool:
        barrier = manager.Barrier(2)

        def failures_at(seconds: float) -> int:
            at = (start + timedelta(seconds=seconds)).isoformat()
            work = [(backend_url, world.ns, "parse", at, 20, barrier)] * 2
            return sum(pool.starmap(fail_every_claim, work))

        assert failures_at(0) == 1  # not 2, not 40: the other worker and the next tries wait
        assert failures_at(9.9) == 0
        assert failures_at(10) == 1  # the back-off ran out: one retry, which fails
        assert failures_at(29.9) == 0  # the second failure waits twice as long
        # The sender fixes the file: the input lot gets a new version, the lot is taken at once.
        world.lots.invalidate(world.ns, "raw", LOT)
        world.produce("ingest", LOT)
        assert failures_at(10) == 1
    failed = [r for r in world.lineage.runs.list_runs(world.ns, "parse").items if r.state is RunState.FAILED]
    assert len(failed) == 3
    events = [e for e in world.lineage.lot_events.after(0) if e.kind is LotEventKind.FAILED]
    assert [e.attempt for e in events] == [1, 2, 3]
    assert {e.reason for e in events} == {"[MALFORMED_RECORD_IN_PARSING] bad.csv"}


def test_a_reaped_claim_is_a_failed_event_and_is_due_again_at_once(
    timed_world: LotWorld, clock: ManualClock
) -> None:
    world = _world(timed_world)
    lineage = world.lineage
    claim = world.lots.claim("doomed", world.ns, "parse", lease=timedelta(seconds=30))
    assert claim is not None
    start = lineage.lot_events.last_position()
    clock.advance(timedelta(seconds=31))
    assert world.lots.reap() == 1
    [event] = lineage.lot_events.after(start)
    assert (event.kind, event.lot, event.job, event.attempt, event.run_id) == (
        LotEventKind.FAILED,
        LOT,
        "parse",
        1,
        claim.run_id,
    )
    assert event.reason is not None and event.reason.startswith("the lease expired: worker doomed")
    again = _next(world)  # its worker died, which is not the lot's fault: no back-off
    assert again is not None and again.attempt == 2
