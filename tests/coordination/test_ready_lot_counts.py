"""``ready_lot_counts`` (migration 0018) is kept by triggers: after a random mix of every kind of
write to data_status, through both claim paths, the counts equal a fresh count of the rows."""

from __future__ import annotations

import contextlib
import random
from datetime import timedelta

import pytest
import sqlalchemy as sa

from lotline.domain.clock import ManualClock
from lotline.domain.errors import Conflict, InvalidInput, NotFound
from lotline.domain.gaps import GapState
from lotline.services import Lineage
from lotline.store.schema import data_status, ready_lot_counts
from support.lots import LotWorld

LOTS = [f"2023010{day}PT1H{hour:03d}" for day in (1, 2) for hour in range(24)]
REFUSED = (Conflict, InvalidInput, NotFound)


def _fresh_counts(lineage: Lineage) -> dict[tuple[object, str, object], int]:
    """READY OUTPUT rows counted by (dataset, lot id less its last character, job), from the rows."""
    ds = data_status
    key = sa.func.substr(ds.c.lot, 1, sa.func.length(ds.c.lot) - 1)
    query = (
        sa.select(ds.c.dataset_id, key, ds.c.job_id, sa.func.count())
        .where(ds.c.role == "OUTPUT", ds.c.status == "READY")
        .group_by(ds.c.dataset_id, key, ds.c.job_id)
    )
    with lineage.store.read() as connection:
        return {(d, k, j): n for d, k, j, n in connection.execute(query)}


def _kept_counts(lineage: Lineage) -> dict[tuple[object, str, object], int]:
    c = ready_lot_counts.c
    query = sa.select(c.dataset_id, c.lot_prefix, c.job_id, c.lots).where(c.lots != 0)
    with lineage.store.read() as connection:
        return {(d, k, j): n for d, k, j, n in connection.execute(query)}


def _step(
    world: LotWorld, timed: LotWorld, clock: ManualClock, pick: random.Random, held: list[tuple[str, str]]
) -> None:
    """One write of a random kind, on a random lot (a release: a lot held before); a write the
    lot's state refuses is skipped."""
    job, dataset = pick.choice([("land", "raw"), ("clean", "cleaned")])
    lot = pick.choice(LOTS)
    kind = pick.choice(["complete", "complete", "complete", "fail", "run", "reap", "invalidate", "many"])
    kind = (
        pick.choice([kind, "hold", "release", "release", "clean", "delete"]) if pick.random() < 0.3 else kind
    )
    lots = world.lots
    if kind in ("complete", "fail", "run"):
        claim = world.claim(job, lot)
        if claim is not None and kind == "complete":
            lots.complete(claim)
        elif claim is not None and kind == "fail":
            lots.fail(claim, error="ValueError: bad line")
    elif kind == "reap":  # the Python claim path, a lease that runs out, the reaper
        if timed.lots.claim("w2", world.ns, job, lot=lot, lease=timedelta(seconds=1)) is not None:
            clock.advance(timedelta(seconds=5))
            timed.lots.reap()
    elif kind == "invalidate":
        lots.invalidate(world.ns, dataset, lot)
    elif kind == "many":
        lots.invalidate_many(world.ns, dataset, pick.sample(LOTS, 2))
    elif kind == "hold":
        lots.hold_lot(world.ns, dataset, lot)
        held.append((dataset, lot))
    elif kind == "release" and held:
        lots.release_lot(world.ns, *held.pop(pick.randrange(len(held))))
    elif kind == "clean":
        lots.clean(world.ns, job, lot)
    else:  # an operator's delete of rows, outside lotline's paths
        with world.lineage.store.write() as connection:
            connection.execute(sa.delete(data_status).where(data_status.c.lot == lot))


@pytest.mark.parametrize("seed", [1, 2])
def test_the_counts_equal_a_fresh_count_after_a_random_mix_of_writes(
    world: LotWorld, timed_world: LotWorld, clock: ManualClock, seed: int
) -> None:
    world.job("land", output="raw")
    world.job("clean", output="cleaned", inputs=["raw"])
    pick = random.Random(seed)
    held: list[tuple[str, str]] = []
    for lot in LOTS[:30]:
        world.produce("land", lot)
    for _ in range(150):
        with contextlib.suppress(*REFUSED):
            _step(world, timed_world, clock, pick, held)
    counted = _kept_counts(world.lineage)
    assert counted == _fresh_counts(world.lineage)
    assert sum(counted.values()) > 0  # the mix left READY lots to count


def test_a_report_reads_complete_tens_and_days_and_the_rows_of_the_others(world: LotWorld) -> None:
    """Day 1 complete, day 2 with a full ten, a ten with one lot missing, a ten with none: the
    report's runs are those of the rows."""
    world.job("land", output="raw")
    day_two = [f"20230102PT1H{hour:03d}" for hour in range(24)]
    world.produce("land", *LOTS[:24], *day_two[:10], *day_two[10:15], *day_two[16:20])
    report = world.lineage.gaps.report(world.ns, job="land", start="2023-01-01", end="2023-01-03")
    assert report.counts[GapState.COMPLETE] == 24 + 10 + 9
    assert [(r.state, r.first, r.last) for r in report.runs] == [
        (GapState.MISSING, day_two[15], day_two[15]),
        (GapState.MISSING, day_two[20], day_two[23]),
    ]
