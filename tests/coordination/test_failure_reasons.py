"""A failed run's one-line reason (``runs.error``), recorded once and read by the status views, on
SQLite and PostgreSQL. The Spark side (what the line says of a Spark error) is in
``tests/spark/test_failures.py``."""

from __future__ import annotations

from datetime import timedelta

from lotline.domain.clock import ManualClock
from lotline.domain.coordination import Role
from lotline.domain.failures import INTERRUPTED, MAX_REASON, Failure
from lotline.domain.runs import RunState
from support.lots import LotWorld


def _failed(world: LotWorld, lot: str, **fail: object) -> str | None:
    """Fail the lot of JobA with ``fail``'s arguments; the reason its status row shows."""
    claim = world.claim("JobA", lot)
    assert claim is not None
    world.lots.fail(claim, **fail)  # type: ignore[arg-type]
    [row] = [r for r in world.lots.status(world.ns, job="JobA") if r.lot == lot]
    assert row.status.value == "ERROR"
    run = world.lineage.runs.get_run(claim.run_id)
    assert run.state is RunState.FAILED
    # The facet's message is the same line; the stack is kept beside it.
    assert run.facets["errorMessage"]["message"] == row.error
    return row.error


def test_the_reason_is_one_bounded_line_recorded_with_the_failure(world: LotWorld) -> None:
    world.job("JobA", output="DataA")
    assert _failed(world, "1", error=ValueError("bad value 7\nsecond line")) == "ValueError: bad value 7"
    assert _failed(world, "2", error=KeyboardInterrupt()) == INTERRUPTED
    long = _failed(world, "3", error=RuntimeError("x" * 5000))
    assert long is not None
    assert len(long) == MAX_REASON
    assert long.endswith("…")
    # The caller's line (spark/failures.py's) wins over the exception's own; the stack stays whole.
    claim = world.claim("JobA", "4")
    assert claim is not None
    world.lots.fail(claim, error=Failure("the cause", "An error occurred while calling o3.save."))
    run = world.lineage.runs.get_run(claim.run_id)
    assert run.facets["errorMessage"]["message"] == "the cause"
    assert "An error occurred while calling o3.save." in run.facets["errorMessage"]["stackTrace"]
    assert {r.lot: r.error for r in world.lots.status(world.ns, job="JobA")}["4"] == "the cause"


def test_a_lot_that_is_not_in_error_shows_no_reason(world: LotWorld) -> None:
    world.job("JobA", output="DataA")
    assert _failed(world, "1", error="disk full") == "disk full"
    world.produce("JobA", "1")  # the retry succeeds: the READY lot has no reason
    world.produce("JobA", "2")
    assert {r.lot: r.error for r in world.lots.status(world.ns, job="JobA")} == {"1": None, "2": None}
    assert [r.error for r in world.lots.status(world.ns, job="JobA", role=Role.INPUT)] == []


def test_the_reaper_records_why_it_failed_a_run(clock: ManualClock, timed_world: LotWorld) -> None:
    world = timed_world
    world.job("JobA", output="DataA")
    claim = world.lots.claim("w-dead", world.ns, "JobA", lot="1", lease=timedelta(seconds=1))
    assert claim is not None
    clock.advance(timedelta(seconds=5))
    assert world.lots.reap() == 1
    [row] = world.lots.status(world.ns, job="JobA")
    assert row.error is not None
    assert row.error.startswith("the lease expired: worker w-dead stopped heartbeating")
