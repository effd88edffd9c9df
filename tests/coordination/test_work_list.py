"""The claim search's work list (``lot_frontier``): it holds pending lots only, every event that can
make a lot eligible puts it there, and a claim costs the same statements whatever the history."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from lotline.domain.clock import ManualClock
from lotline.domain.coordination import FIRST_RETRY, Role, Status
from lotline.store.schema import jobs, lot_frontier
from support.lots import LotWorld


def _hints(world: LotWorld, job: str) -> list[str]:
    """The lots on ``job``'s work list, read straight from the table."""
    query = (
        sa.select(lot_frontier.c.lot)
        .join(jobs, jobs.c.id == lot_frontier.c.job_id)
        .where(jobs.c.name == job)
        .order_by(lot_frontier.c.lot)
    )
    with world.lineage.store.read() as connection:
        return list(connection.execute(query).scalars())


def _consume(world: LotWorld, job: str, count: int) -> None:
    for _ in range(count):
        claim = world.claim(job)
        assert claim is not None
        world.lots.complete(claim)


@contextmanager
def _statements(world: LotWorld) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(*args: object) -> None:
        seen.append(str(args[2]))

    engine = world.lineage.store.engine
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def _chain(world: LotWorld) -> None:
    world.job("JobA", output="DataA")
    world.job("JobB", inputs=["DataA"], output="DataB")


def test_the_work_list_holds_the_lots_not_yet_done_and_nothing_else(
    timed_world: LotWorld, clock: ManualClock
) -> None:
    world = timed_world
    _chain(world)
    lots = [f"2023-01-{day:02d}" for day in range(1, 11)]
    world.produce("JobA", *lots)
    assert _hints(world, "JobB") == lots
    assert _hints(world, "JobA") == []  # a job without inputs takes named lots only
    _consume(world, "JobB", 7)
    assert _hints(world, "JobB") == lots[7:]
    failing = world.claim("JobB")
    assert failing is not None
    world.lots.fail(failing)
    assert _hints(world, "JobB") == lots[7:]  # the failed lot is pending again (after its back-off)
    assert world.lots.counts(world.ns, "JobB") == {Status.READY: 7, Status.ERROR: 1}
    _consume(world, "JobB", 2)
    assert world.claim("JobB") is None
    clock.advance(FIRST_RETRY)
    _consume(world, "JobB", 1)
    assert world.claim("JobB") is None
    assert _hints(world, "JobB") == []
    assert world.lots.counts(world.ns, "JobB") == {Status.READY: 10}


def test_a_consumer_registered_late_finds_what_was_produced_before(world: LotWorld) -> None:
    _chain(world)
    world.produce("JobA", "1", "2", "3")
    _consume(world, "JobB", 2)
    world.job("JobC", inputs=["DataA"], output="DataC")
    assert _hints(world, "JobC") == ["1", "2", "3"]
    world.lots.register_job(world.ns, "JobB", inputs=["DataA"], output="DataB")  # re-registered
    assert _hints(world, "JobB") == ["3"]  # the lots it already did are not pending
    _consume(world, "JobC", 3)
    assert world.claim("JobC") is None


def test_a_reopened_output_is_pending_again_for_its_producer(world: LotWorld) -> None:
    _chain(world)
    world.produce("JobA", "1")
    _consume(world, "JobB", 1)
    assert world.claim("JobB") is None
    world.lots.invalidate(world.ns, "DataB", "1")
    again = world.claim("JobB")
    assert again is not None
    assert (again.lot, again.attempt) == ("1", 2)


def test_releasing_a_held_lot_puts_it_back_on_the_work_list(world: LotWorld) -> None:
    _chain(world)
    world.produce("JobA", "1")
    failing = world.claim("JobB")
    assert failing is not None
    world.lots.fail(failing)
    world.lots.hold_lot(world.ns, "DataB", "1")
    assert world.claim("JobB") is None  # the hint was looked at and dropped: the lot is held
    assert world.lots.release_lot(world.ns, "DataB", "1") is not None
    assert world.claim("JobB") is not None
    world.lots.hold_lot(world.ns, "DataA", "2")  # never produced: release removes the row
    world.lots.release_lot(world.ns, "DataA", "2")
    assert world.status("DataA", "2", "JobA", role=Role.OUTPUT) is None


def test_a_reopened_hour_of_a_mapped_job_is_found_again(world: LotWorld) -> None:
    world.job("ingest", output="events")
    world.job("hourly", inputs=["events"], output="hours", mapping="PT5M->PT1H")
    world.produce("ingest", *[f"20230101PT5M{i:03d}" for i in range(12)])
    _consume(world, "hourly", 1)
    assert _hints(world, "hourly") == []
    world.lots.invalidate(world.ns, "hours", "20230101PT1H000")
    assert _hints(world, "hourly") == ["20230101PT1H000"]  # an output lot stands for itself
    again = world.claim("hourly")
    assert again is not None
    assert (again.lot, again.attempt, len(again.input_lots)) == ("20230101PT1H000", 2, 12)


def test_a_claim_runs_the_same_statements_after_three_lots_or_thirty(world: LotWorld) -> None:
    _chain(world)
    world.produce("JobA", *[str(lot) for lot in range(100, 140)])
    _consume(world, "JobB", 3)
    with _statements(world) as early:
        _consume(world, "JobB", 1)
    _consume(world, "JobB", 26)
    with _statements(world) as late:
        _consume(world, "JobB", 1)
    assert early == late
