"""A coordinated job with several outputs (issue 30 §2), on SQLite and PostgreSQL: every output has
its own OUTPUT rows, which claims, leases, the reaper, completion, holds and invalidation move
together; refusals change nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lotline.domain.clock import ManualClock
from lotline.domain.coordination import Status
from lotline.domain.errors import Conflict, InvalidInput, NotFound
from lotline.domain.manifests import LotEventKind
from lotline.services.lots import OutputWritten
from support.lots import LotWorld

LOT = "2023-01-01"


def _statuses(world: LotWorld, job: str) -> dict[str, str | None]:
    return {d: world.status(d, LOT, job) for d in ("first", "second", "downstream")}


def test_a_job_s_outputs_move_together(timed_world: LotWorld, clock: ManualClock) -> None:
    world, lots = timed_world, timed_world.lots
    world.job("source", output="raw")
    for dataset in ("first", "second", "downstream", "elsewhere"):
        world.lineage.catalog.upsert_dataset(world.ns, dataset)
    lots.register_job(world.ns, "split", output=["first", "second"], inputs=["raw"])
    lots.register_job(world.ns, "after", output="downstream", inputs=["second"])
    world.produce("source", LOT)

    # A dataset has one producer, whichever output it is; refused, nothing changes.
    with pytest.raises(Conflict, match="already produced by job lots:split"):
        lots.register_job(world.ns, "thief", output=["elsewhere", "second"], inputs=["raw"])
    with pytest.raises(InvalidInput, match="outputs must be distinct"):
        lots.register_job(world.ns, "twice", output=["first", "first"], inputs=["raw"])
    for refused in ("thief", "twice"):
        with pytest.raises(NotFound):
            world.lineage.catalog.get_job(world.ns, refused)

    # The claim takes both outputs' rows; the reaper fails both (one claim, two FAILED events).
    claim = lots.claim("doomed", world.ns, "split", lease=timedelta(seconds=30))
    assert claim is not None and [n for n, _ in claim.output_datasets] == ["first", "second"]
    assert _statuses(world, "split") == {"first": "RUNNING", "second": "RUNNING", "downstream": None}
    clock.advance(timedelta(seconds=20))
    lots.heartbeat(claim, timedelta(seconds=30))  # extends both outputs' leases
    clock.advance(timedelta(seconds=20))
    assert lots.reap() == 0
    start = world.lineage.lot_events.last_position()
    clock.advance(timedelta(seconds=11))
    assert lots.reap() == 1
    assert _statuses(world, "split") == {"first": "ERROR", "second": "ERROR", "downstream": None}
    failed = world.lineage.lot_events.after(start)
    assert sorted((e.dataset, e.kind) for e in failed) == [
        ("first", LotEventKind.FAILED),
        ("second", LotEventKind.FAILED),
    ]

    # Completion publishes both; a name that is not one of its outputs is refused, nothing written.
    claim = world.claim("split", LOT)
    assert claim is not None and claim.attempt == 2
    with pytest.raises(
        InvalidInput, match=r"job split has no output downstream \(its outputs: first, second\)"
    ):
        lots.complete(claim, outputs={"first": OutputWritten(), "downstream": OutputWritten()})
    assert _statuses(world, "split")["second"] == "RUNNING"
    lots.complete(claim, outputs={"second": OutputWritten(facets={"lotline_test": {"n": 1}})})
    assert _statuses(world, "split") == {"first": "READY", "second": "READY", "downstream": None}
    assert lots.counts(world.ns, "split") == {Status.READY: 1}  # one lot, counted once (issue 39.1)
    second = world.lineage.versions.current_version(world.ns, "second", LOT)
    assert second is not None and second.run_id == claim.run_id
    world.produce("after", LOT)  # the second output is another job's input

    # Holding one output holds the other; releasing one releases both.
    assert lots.hold_lot(world.ns, "second", LOT)
    assert _statuses(world, "split")["first"] == "HOLD"
    assert lots.release_lot(world.ns, "first", LOT) is Status.READY
    assert _statuses(world, "split") == {"first": "READY", "second": "READY", "downstream": None}

    # Invalidating the input reopens every output's lot, and what was made from them.
    reopened = lots.invalidate(world.ns, "raw", LOT)
    assert sorted(r.name for r in reopened) == ["downstream", "first", "raw", "second"]
    assert _statuses(world, "split") == {"first": "RESUBMIT", "second": "RESUBMIT", "downstream": None}
    assert world.status("downstream", LOT, "after") == "RESUBMIT"
