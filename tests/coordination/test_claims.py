"""Claims, eligibility, lot mappings, leases, fencing, the reaper, holds, arc states and bad input."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from lotline.domain.clock import ManualClock
from lotline.domain.coordination import ArcState, Role
from lotline.domain.errors import Conflict, InvalidInput, NotFound
from lotline.domain.runs import RunAction, RunState
from support.lots import LotWorld
from support.ol import run_event

SHORT = timedelta(milliseconds=50)


def _chain(world: LotWorld) -> None:
    world.job("JobA", output="DataA")
    world.job("JobB", inputs=["DataA"], output="DataB")


# -- eligibility ----------------------------------------------------------------------------------
def test_lots_are_claimed_in_lot_order_and_every_input_must_be_ready(world: LotWorld) -> None:
    world.job("ingestA", output="A")
    world.job("ingestB", output="B")
    world.job("join", inputs=["A", "B"], output="AB")
    world.produce("ingestA", "2023-01-02", "2023-01-01", "2023-01-03")
    world.produce("ingestB", "2023-01-03", "2023-01-02")
    first = world.claim("join")
    second = world.claim("join", worker="w2")
    assert first is not None
    assert second is not None
    assert (first.lot, second.lot) == ("2023-01-02", "2023-01-03")
    assert set(first.input_lots) == {("A", "2023-01-02"), ("B", "2023-01-02")}
    assert world.claim("join") is None  # 2023-01-01 lacks B


def test_a_named_lot_that_is_not_eligible_says_why_and_changes_nothing(world: LotWorld) -> None:
    _chain(world)
    with pytest.raises(Conflict, match="input lots:DataA lot 1 is not produced"):
        world.claim("JobB", "1")
    world.produce("JobA", "1")
    with pytest.raises(Conflict, match="already READY"):
        world.claim("JobA", "1")
    claim = world.claim("JobB", "1")
    assert claim is not None
    with pytest.raises(Conflict, match="being produced"):
        world.claim("JobB", "1", worker="w2")
    before = world.table()
    with pytest.raises(Conflict):
        world.claim("JobB", "1", worker="w2")
    assert world.table() == before


def test_skipped_lots_are_passed_over_and_stay_eligible(world: LotWorld) -> None:
    world.job("ingest", output="A")
    world.job("copy", inputs=["A"], output="B")
    world.job("hourly", inputs=["A"], output="H", mapping="PT5M->PT1H")
    world.produce("ingest", *[f"20230101PT5M{i:03d}" for i in range(24)])
    skip = {"20230101PT5M000", "20230101PT5M001"}
    claim = world.lots.claim("w", world.ns, "copy", skip=skip)
    assert claim is not None
    assert claim.lot == "20230101PT5M002"
    hour = world.lots.claim("w", world.ns, "hourly", skip={"20230101PT1H000"})
    assert hour is not None
    assert hour.lot == "20230101PT1H001"
    assert world.lots.claim("w", world.ns, "hourly", skip={"20230101PT1H000"}) is None
    # Skipping is the caller's choice for one search: the lots are still on the work list.
    again = world.claim("copy")
    assert again is not None
    assert again.lot == "20230101PT5M000"
    first_hour = world.claim("hourly")
    assert first_hour is not None
    assert first_hour.lot == "20230101PT1H000"


def test_twelve_five_minute_lots_make_one_hour_lot(world: LotWorld) -> None:
    world.job("ingest", output="events")
    world.job("hourly", inputs=["events"], output="hours", mapping="PT5M->PT1H")
    lots = [f"20230101PT5M{i:03d}" for i in range(24)]  # hours 00 and 01
    world.produce("ingest", *lots[:11], *lots[12:])  # 00:55 is missing
    claim = world.claim("hourly")
    assert claim is not None
    assert claim.lot == "20230101PT1H001"
    assert [lot for _, lot in claim.input_lots] == lots[12:]
    assert world.claim("hourly", worker="w2") is None  # hour 00 is incomplete
    with pytest.raises(Conflict, match="20230101PT5M011 is not produced"):
        world.claim("hourly", "20230101PT1H000")
    world.produce("ingest", lots[11])
    world.lots.complete(claim)
    other = world.claim("hourly")
    assert other is not None
    assert other.lot == "20230101PT1H000"
    run = world.lineage.runs.get_run(other.run_id)
    assert sorted(io.lot for io in run.inputs) == lots[:12]  # no input at the hour lot itself
    assert [(io.dataset, io.lot) for io in run.outputs] == [("hours", "20230101PT1H000")]


def test_many_hour_lots_make_one_daily_lot(world: LotWorld) -> None:
    world.job("ingest", output="hours")
    world.job("daily", inputs=["hours"], output="days", mapping="PT1H->P1D")
    world.produce("ingest", *[f"20230101PT1H{i:03d}" for i in range(24)])
    claim = world.claim("daily")
    assert claim is not None
    assert (claim.lot, len(claim.input_lots)) == ("20230101P1D000", 24)
    world.lots.complete(claim)
    assert world.status("hours", "20230101PT1H023", "daily", role=Role.INPUT) == "DONE"


# -- leases, fencing, the reaper -------------------------------------------------------------------
def test_heartbeat_extends_a_live_claim(timed_world: LotWorld, clock: ManualClock) -> None:
    world = timed_world
    _chain(world)
    claim = world.lots.claim("w1", world.ns, "JobA", lot="1", lease=timedelta(seconds=2))
    assert claim is not None
    renewed = world.lots.heartbeat(claim, lease=timedelta(minutes=5))
    assert renewed.lease_expires_at > claim.lease_expires_at
    clock.advance(timedelta(seconds=3))  # the first lease has run out; the renewed one has not
    assert world.lots.reap() == 0
    world.lots.complete(renewed)
    assert world.status("DataA", "1", "JobA") == "READY"


def test_an_expired_claim_is_reaped_and_its_late_completion_is_rejected(
    timed_world: LotWorld, clock: ManualClock
) -> None:
    world = timed_world
    _chain(world)
    world.produce("JobA", "1")
    claimed_at = clock.now()
    dead = world.lots.claim("dead", world.ns, "JobB", lease=SHORT)
    assert dead is not None
    clock.advance(2 * SHORT)
    # Before the reaper runs, the expired claim can neither beat nor commit.
    with pytest.raises(Conflict, match="no longer a live claim"):
        world.lots.heartbeat(dead)
    with pytest.raises(Conflict, match="no longer a live claim"):
        world.lots.complete(dead)
    assert world.lots.reap() == 1
    assert world.status("DataB", "1", "JobB") == "ERROR"
    assert world.status("DataA", "1", "JobB", role=Role.INPUT) == "ERROR"
    reaped = world.lineage.runs.get_run(dead.run_id)
    assert reaped.state is RunState.FAILED
    # The run says why (issue 29.12): whose lease ran out, and when it last beat (here: the claim).
    message = reaped.facets["errorMessage"]["message"]
    assert message.startswith(
        f"the lease expired: worker dead stopped heartbeating at {claimed_at:%Y-%m-%d %H:%M:%S} UTC"
    )
    alive = world.claim("JobB", worker="alive")
    assert alive is not None
    assert alive.attempt == 2
    before = world.table()
    with pytest.raises(Conflict):
        world.lots.complete(dead)  # the presumed-dead worker comes back: rejected, nothing changes
    with pytest.raises(Conflict):
        world.lots.fail(dead)
    assert world.table() == before
    world.lots.complete(alive)
    assert world.current_version_run("DataB", "1") == alive.run_id


def test_a_run_a_live_claim_owns_cannot_be_ended_from_outside(world: LotWorld) -> None:
    """Issue 29.1 (a): the REST transitions refuse it (409 naming the claim) and change nothing."""
    _chain(world)
    world.produce("JobA", "1")
    claim = world.claim("JobB", worker="w-live")
    assert claim is not None
    before = world.table()
    for action in (RunAction.COMPLETE, RunAction.FAIL, RunAction.ABORT):
        with pytest.raises(Conflict, match="belongs to a claim") as refused:
            world.lineage.runs.transition(claim.run_id, action)
        message = refused.value.message
        assert f"job {world.ns}:JobB lot 1" in message and "worker w-live" in message
        assert claim.lease_expires_at.isoformat() in message and refused.value.http_status == 409
    assert world.table() == before
    assert world.lineage.runs.get_run(claim.run_id).state is RunState.RUNNING
    world.lots.complete(claim)  # its worker still ends it
    assert world.status("DataB", "1", "JobB") == "READY"


def test_a_child_run_of_a_claimed_run_cannot_be_ended_from_outside_while_the_claim_lives(
    world: LotWorld,
) -> None:
    """A part of a claimed lot (``partition_by``'s child run) is ended by the worker too; from outside
    the REST transitions answered 200 and the worker then found its child ended under it."""
    _chain(world)
    world.produce("JobA", "1")
    claim = world.claim("JobB", worker="w-live")
    assert claim is not None
    child = world.lineage.runs.create_run(world.ns, "JobB", parent_run_id=claim.run_id, lot="1")
    world.lineage.runs.transition(child.id, RunAction.START)
    with pytest.raises(Conflict, match=f"a part of run {claim.run_id}") as refused:
        world.lineage.runs.transition(child.id, RunAction.COMPLETE)
    assert "worker w-live" in refused.value.message and refused.value.http_status == 409
    assert world.lineage.runs.get_run(child.id).state is RunState.RUNNING
    world.lots.complete(claim)
    assert world.lineage.runs.transition(child.id, RunAction.ABORT).state is RunState.ABORTED  # no claim now


def test_an_openlineage_end_of_a_claimed_run_is_recorded_but_fails_to_project(world: LotWorld) -> None:
    """Issue 29.1 (a): the event is journaled; its projection fails with the claim as the reason, and
    the next events still apply."""
    _chain(world)
    world.produce("JobA", "1")
    claim = world.claim("JobB", worker="w-live")
    assert claim is not None
    other = str(uuid.uuid4())
    world.lineage.openlineage.accept_batch(
        [
            run_event(world.ns, "JobB", str(claim.run_id), "COMPLETE"),
            run_event(world.ns, "elsewhere", other, "START"),
        ]
    )
    drained = world.lineage.projection.drain()
    assert (len(drained.applied), len(drained.failed)) == (1, 1)
    [(_, reason)] = world.lineage.projection.failures()
    assert "belongs to a claim" in reason and f"job {world.ns}:JobB lot 1" in reason and "w-live" in reason
    assert world.lineage.runs.get_run(claim.run_id).state is RunState.RUNNING
    assert world.status("DataB", "1", "JobB") == "RUNNING"
    world.lots.complete(claim)
    assert world.status("DataB", "1", "JobB") == "READY"


def test_a_claimed_runs_child_started_and_ended_by_events_of_one_group_fails_to_end(world: LotWorld) -> None:
    """A group checks the claims of the runs its events end once, up front: a child that an earlier
    event of the same group made a part of a claimed run is still refused its end, as event by
    event; the other runs of the group still end."""
    _chain(world)
    world.produce("JobA", "1")
    claim = world.claim("JobB", worker="w-live")
    assert claim is not None
    child, other = str(uuid.uuid4()), str(uuid.uuid4())
    start = run_event(world.ns, "JobB-part", child, "START")
    start["run"]["facets"]["parent"] = {
        "_producer": "p",
        "_schemaURL": "s",
        "run": {"runId": str(claim.run_id)},
        "job": {"namespace": world.ns, "name": "JobB"},
    }
    world.lineage.openlineage.accept_batch(
        [
            start,
            run_event(world.ns, "elsewhere", other, "START"),
            run_event(world.ns, "JobB-part", child, "COMPLETE", second=1),
            run_event(world.ns, "elsewhere", other, "COMPLETE", second=1),
        ]
    )
    drained = world.lineage.projection.drain()
    assert (len(drained.applied), len(drained.failed)) == (3, 1)
    [(_, reason)] = world.lineage.projection.failures()
    assert f"a part of run {claim.run_id}" in reason and "w-live" in reason
    assert world.lineage.runs.get_run(uuid.UUID(child)).state is RunState.RUNNING
    assert world.lineage.runs.get_run(uuid.UUID(other)).state is RunState.COMPLETED


def test_a_dead_workers_run_cannot_be_ended_from_outside_before_the_reaper_runs(
    timed_world: LotWorld, clock: ManualClock
) -> None:
    """Issue 39.13: the claim's lease ran out (its worker died), no reaper ran yet. A REST complete
    (or fail, abort) is refused with 409 naming the claim and saying the lease ran out, and an
    OpenLineage COMPLETE fails to project: nothing changes (no version, the run RUNNING). The
    reaper then fails the lot and its run: one FAILED run, no version, and the lot is claimed again."""
    world = timed_world
    _chain(world)
    world.produce("JobA", "1")
    dead = world.lots.claim("dead", world.ns, "JobB", lot="1", lease=SHORT)
    assert dead is not None
    clock.advance(2 * SHORT)
    before = world.table()
    for action in (RunAction.COMPLETE, RunAction.FAIL, RunAction.ABORT):
        with pytest.raises(Conflict, match="belongs to a claim") as refused:
            world.lineage.runs.transition(dead.run_id, action)
        assert "worker dead" in refused.value.message and "run out" in refused.value.message
        assert refused.value.http_status == 409
    world.lineage.openlineage.accept_batch([run_event(world.ns, "JobB", str(dead.run_id), "COMPLETE")])
    drained = world.lineage.projection.drain()
    assert (len(drained.applied), len(drained.failed)) == (0, 1)
    [(_, reason)] = world.lineage.projection.failures()
    assert "belongs to a claim" in reason and "worker dead" in reason
    assert world.table() == before
    assert world.lineage.runs.get_run(dead.run_id).state is RunState.RUNNING
    assert world.current_version_run("DataB", "1") is None

    assert world.lots.reap() == 1
    assert world.status("DataB", "1", "JobB") == "ERROR"
    assert world.status("DataA", "1", "JobB", role=Role.INPUT) == "ERROR"  # released
    assert world.lineage.runs.get_run(dead.run_id).state is RunState.FAILED
    assert world.current_version_run("DataB", "1") is None
    again = world.claim("JobB", "1", worker="alive")
    assert again is not None and again.attempt == 2
    world.lots.complete(again)
    assert world.current_version_run("DataB", "1") == again.run_id


def test_a_claimed_run_s_transitions_are_in_time_order(world: LotWorld) -> None:
    """Issue 29.12: the claim's start is taken before its run is written; NEW is not stamped after it."""
    _chain(world)
    world.produce("JobA", "1")
    claim = world.claim("JobB")
    assert claim is not None
    world.lots.complete(claim)
    run = world.lineage.runs.get_run(claim.run_id)
    assert [t.state for t in run.transitions] == [RunState.NEW, RunState.RUNNING, RunState.COMPLETED]
    times = [t.at for t in run.transitions]
    assert times == sorted(times)


def test_a_worker_cannot_finish_another_workers_claim(world: LotWorld) -> None:
    _chain(world)
    claim = world.claim("JobA", "1")
    assert claim is not None
    impostor = type(claim)(**{**claim.__dict__, "owner": "impostor"})
    with pytest.raises(Conflict):
        world.lots.complete(impostor)
    assert world.status("DataA", "1", "JobA") == "RUNNING"


# -- invalidation of a lot someone is reading ------------------------------------------------------
def test_invalidation_revokes_a_consumer_running_on_the_lot(world: LotWorld) -> None:
    _chain(world)
    world.produce("JobA", "1")
    reading = world.claim("JobB")
    assert reading is not None
    world.lots.invalidate(world.ns, "DataA", "1")
    assert world.status("DataB", "1", "JobB") == "ERROR"
    assert world.lineage.runs.get_run(reading.run_id).state is RunState.FAILED
    with pytest.raises(Conflict):
        world.lots.complete(reading)
    assert world.lots.invalidate(world.ns, "DataA", "1") == []  # already reopened: no-op


def test_only_a_ready_lot_can_be_invalidated(world: LotWorld) -> None:
    _chain(world)
    with pytest.raises(Conflict, match="never been produced"):
        world.lots.invalidate(world.ns, "DataA", "1")
    claim = world.claim("JobA", "1")
    assert claim is not None
    with pytest.raises(Conflict, match="is RUNNING"):
        world.lots.invalidate(world.ns, "DataA", "1")
    assert world.status("DataA", "1", "JobA") == "RUNNING"


# -- hold and release --------------------------------------------------------------------------------
def test_holding_a_lot_stops_producer_and_consumers_until_released(world: LotWorld) -> None:
    _chain(world)
    world.produce("JobA", "1")
    assert world.lots.hold_lot(world.ns, "DataA", "1") is True
    assert world.lots.hold_lot(world.ns, "DataA", "1") is False
    assert world.status("DataA", "1", "JobA") == "HOLD"
    assert world.claim("JobB") is None
    assert world.lots.arc_state(world.ns, "JobA", "1") is ArcState.COMPLETE
    assert world.lots.release_lot(world.ns, "DataA", "1") is not None
    assert world.status("DataA", "1", "JobA") == "READY"
    assert world.claim("JobB") is not None


def test_holding_a_lot_never_produced_and_releasing_it(world: LotWorld) -> None:
    _chain(world)
    world.lots.hold_lot(world.ns, "DataA", "7")
    with pytest.raises(Conflict, match="HOLD"):
        world.claim("JobA", "7")
    assert world.lots.release_lot(world.ns, "DataA", "7") is None
    assert world.status("DataA", "7", "JobA") is None
    with pytest.raises(Conflict, match="not on hold"):
        world.lots.release_lot(world.ns, "DataA", "7")


def test_holding_a_job_stops_its_claims(world: LotWorld) -> None:
    _chain(world)
    world.produce("JobA", "1")
    assert world.lots.hold_job(world.ns, "JobB") is True
    assert world.claim("JobB") is None
    with pytest.raises(Conflict, match="on hold"):
        world.claim("JobB", "1")
    world.lots.release_job(world.ns, "JobB")
    with pytest.raises(Conflict, match="not on hold"):
        world.lots.release_job(world.ns, "JobB")
    assert world.claim("JobB") is not None


# -- arc state ----------------------------------------------------------------------------------------
def test_arc_states_follow_the_allowed_transitions(world: LotWorld) -> None:
    _chain(world)
    arc = lambda: world.lots.arc_state(world.ns, "JobA", "1")  # noqa: E731
    assert arc() is ArcState.MISSING
    claim = world.claim("JobA", "1")
    assert claim is not None
    assert arc() is ArcState.RUNNING
    with pytest.raises(Conflict, match="Cannot clean an arc that is running"):
        world.lots.clean(world.ns, "JobA", "1")
    world.lots.fail(claim)
    assert arc() is ArcState.PARTIAL
    world.lots.clean(world.ns, "JobA", "1")
    assert arc() is ArcState.MISSING
    with pytest.raises(Conflict, match="Cannot clean an arc that is missing"):
        world.lots.clean(world.ns, "JobA", "1")
    world.produce("JobA", "1")
    assert arc() is ArcState.COMPLETE
    with pytest.raises(Conflict, match="Cannot clean an arc that is complete"):
        world.lots.clean(world.ns, "JobA", "1")


# -- bad input gets a typed error and changes nothing -----------------------------------------------
def test_a_second_producer_is_a_conflict_and_changes_nothing(world: LotWorld) -> None:
    _chain(world)
    world.lineage.catalog.upsert_dataset(world.ns, "Other")
    with pytest.raises(Conflict, match="already produced by job lots:JobA"):
        world.lots.register_job(world.ns, "Intruder", inputs=["Other"], output="DataA")
    with pytest.raises(NotFound):
        world.lineage.catalog.get_job(world.ns, "Intruder")
    world.lots.register_job(world.ns, "JobA", output="DataA")  # re-registering the producer is fine


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"output": "missing"}, NotFound),
        ({"output": "DataB", "inputs": ["missing"]}, NotFound),
        ({"output": "DataB", "inputs": ["DataB"]}, InvalidInput),
        ({"output": "DataB", "inputs": ["DataA", "DataA"]}, InvalidInput),
        ({"output": "DataB", "inputs": ["DataA"], "lot_mapping": "PT7M->PT1H"}, InvalidInput),
        ({"output": "DataB", "inputs": ["DataA"], "lot_mapping": "PT1H"}, InvalidInput),
        ({"output": "DataB", "lot_mapping": "PT5M->PT1H"}, InvalidInput),
    ],
)
def test_bad_registrations_change_nothing(world: LotWorld, kwargs: dict[str, object], error: type) -> None:
    world.job("JobA", output="DataA")
    world.lineage.catalog.upsert_dataset(world.ns, "DataB")
    with pytest.raises(error):
        world.lots.register_job(world.ns, "New", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        world.lineage.catalog.get_job(world.ns, "New")


def test_unknown_names_and_bad_lots_are_typed_errors(world: LotWorld) -> None:
    _chain(world)
    world.produce("JobA", "1")
    before = world.table()
    lots = world.lots
    with pytest.raises(NotFound):
        lots.claim("w", world.ns, "NoSuchJob")
    with pytest.raises(NotFound):
        lots.claim("w", "nowhere", "JobA")
    with pytest.raises(InvalidInput):
        lots.claim("w", world.ns, "JobA", lot="../etc")
    with pytest.raises(InvalidInput):
        lots.claim("", world.ns, "JobA", lot="2")
    with pytest.raises(InvalidInput):
        lots.claim("w", world.ns, "JobA", lot="2", lease=timedelta(0))
    world.lineage.catalog.upsert_job(world.ns, "Unregistered")
    with pytest.raises(Conflict, match="register it first"):
        lots.claim("w", world.ns, "Unregistered")
    with pytest.raises(NotFound):
        lots.invalidate(world.ns, "NoSuchData", "1")
    with pytest.raises(InvalidInput):
        lots.invalidate(world.ns, "DataA", "20230101pt5m000")
    with pytest.raises(NotFound):
        lots.hold_job(world.ns, "NoSuchJob")
    with pytest.raises(Conflict, match="no producing job"):
        world.lineage.catalog.upsert_dataset(world.ns, "Orphan")
        lots.hold_lot(world.ns, "Orphan", "1")
    with pytest.raises(InvalidInput):
        lots.status(job="JobA")
    assert world.table() == before
