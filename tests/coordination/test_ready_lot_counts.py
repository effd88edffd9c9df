"""``ready_lot_counts`` (migration 0018) is kept by triggers as append-only deltas: after a random mix
of every kind of write to data_status, through both claim paths, with compactions in between, the
sums of the deltas equal a fresh count of the rows; compaction racing writers and other compactions
in separate processes neither deadlocks nor loses a change."""

from __future__ import annotations

import contextlib
import json
import random
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from lotline.domain.clock import ManualClock
from lotline.domain.errors import Conflict, InvalidInput, NotFound
from lotline.domain.gaps import GapState
from lotline.services import Lineage
from lotline.services.gaps import DUST_FLOOR
from lotline.store.engine import Store
from lotline.store.queries import gaps
from lotline.store.schema import data_status, datasets, ready_lot_counts
from support import count_workers
from support.databases import PgDatabases, fresh_url
from support.lots import LotWorld
from support.polling import wait_until
from support.processes import separate_processes

LOTS = [f"2023010{day}PT1H{hour:03d}" for day in (1, 2) for hour in range(24)]
FIRST_KEY, LAST_KEY = LOTS[0][:-1], LOTS[-1][:-1]
REFUSED = (Conflict, InvalidInput, NotFound)
Counts = dict[tuple[object, str, object], int]


def _fresh_counts(store: Store) -> Counts:
    """READY OUTPUT rows counted by (dataset, lot id less its last character, job), from the rows."""
    ds = data_status
    key = sa.func.substr(ds.c.lot, 1, sa.func.length(ds.c.lot) - 1)
    query = (
        sa.select(ds.c.dataset_id, key, ds.c.job_id, sa.func.count())
        .where(ds.c.role == "OUTPUT", ds.c.status == "READY")
        .group_by(ds.c.dataset_id, key, ds.c.job_id)
    )
    with store.read() as connection:
        return {(d, k, j): n for d, k, j, n in connection.execute(query)}


def _kept_counts(store: Store) -> tuple[Counts, int]:
    """The sums of the deltas of each key (those not 0), and the delta rows they were made of."""
    c = ready_lot_counts.c
    query = sa.select(c.dataset_id, c.lot_prefix, c.job_id, sa.func.sum(c.lots), sa.func.count()).group_by(
        c.dataset_id, c.lot_prefix, c.job_id
    )
    with store.read() as connection:
        found = connection.execute(query).all()
    return {(d, k, j): n for d, k, j, n, _ in found if n != 0}, sum(rows for *_, rows in found)


def _compact_all(store: Store) -> int:
    with store.read() as connection:
        ids = list(connection.execute(sa.select(datasets.c.id)).scalars())
    merged = 0
    for dataset_id in ids:
        with store.write() as connection:
            merged += gaps.compact_ready_counts(connection, dataset_id, FIRST_KEY, LAST_KEY)
    return merged


def _step(
    world: LotWorld, timed: LotWorld, clock: ManualClock, pick: random.Random, held: list[tuple[str, str]]
) -> None:
    """One write of a random kind, on a random lot (a release: a lot held before), or a compaction;
    a write the lot's state refuses is skipped."""
    job, dataset = pick.choice([("land", "raw"), ("clean", "cleaned")])
    lot = pick.choice(LOTS)
    kind = pick.choice(["complete", "complete", "complete", "fail", "run", "reap", "invalidate", "many"])
    kind = (
        pick.choice([kind, "hold", "release", "release", "clean", "delete", "compact"])
        if pick.random() < 0.3
        else kind
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
    elif kind == "compact":
        _compact_all(world.lineage.store)
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
    store = world.lineage.store
    counted, rows = _kept_counts(store)
    assert counted == _fresh_counts(store)
    assert sum(counted.values()) > 0  # the mix left READY lots to count
    assert rows > len(counted)
    assert _compact_all(store) > 0
    assert _kept_counts(store) == (counted, len(counted))


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


def test_a_report_compacts_the_counts_it_read_when_their_deltas_outnumber_their_keys(world: LotWorld) -> None:
    """Every lot made, reopened and made again: two delta rows per lot and those of the reopening
    (one per lot on SQLite, one per key on PostgreSQL, whose trigger sees the statement). A report
    over half a day (two keys) leaves them; the report over both days finds more than
    ``DUST_FLOOR`` rows beyond its keys and merges them, to one row per key, the same report before
    and after."""
    world.job("land", output="raw")
    world.produce("land", *LOTS)
    world.lots.invalidate_many(world.ns, "raw", LOTS)
    world.produce("land", *LOTS)
    store = world.lineage.store
    counted, rows = _kept_counts(store)
    assert rows > 2 * len(LOTS) > DUST_FLOOR + 2 * len(counted)
    gap_reports = world.lineage.gaps
    gap_reports.report(world.ns, job="land", start="2023-01-01", end="2023-01-01T12:00:00Z")
    assert _kept_counts(store) == (counted, rows)  # 2 keys: not worth a transaction
    before = gap_reports.report(world.ns, job="land", start="2023-01-01", end="2023-01-03")
    assert _kept_counts(store) == (counted, len(counted)) == (_fresh_counts(store), 6)
    after = gap_reports.report(world.ns, job="land", start="2023-01-01", end="2023-01-03")
    assert after == before
    assert after.counts[GapState.COMPLETE] == len(LOTS)


@pytest.mark.postgres
def test_a_report_on_a_server_that_takes_no_writes_answers_and_leaves_the_deltas(
    pg_databases: PgDatabases,
) -> None:
    """A read-only server (a standby after a failover) answers reads: the report that would compact
    its counts answers all the same and leaves them."""
    url = str(pg_databases.create(f"readonly_{uuid.uuid4().hex[:6]}"))
    lineage = Lineage.over(Store(url))
    store = lineage.store
    store.upgrade()
    name = sa.make_url(url).database
    try:
        world = LotWorld(lineage)
        world.job("land", output="raw")
        world.produce("land", *LOTS)
        world.lots.invalidate_many(world.ns, "raw", LOTS)
        world.produce("land", *LOTS)
        dusty = _kept_counts(store)
        with store.one_statement() as connection:
            connection.exec_driver_sql(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        store.engine.dispose()  # new connections: read-only
        report = lineage.gaps.report(world.ns, job="land", start="2023-01-01", end="2023-01-03")
        assert report.counts[GapState.COMPLETE] == len(LOTS)
        store.engine.dispose()
        assert _kept_counts(store) == dusty
    finally:
        with store.engine.connect() as opened:
            admin = opened.execution_options(isolation_level="AUTOCOMMIT")
            admin.exec_driver_sql("SET default_transaction_read_only = off")
            admin.exec_driver_sql(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
        lineage.close()


@pytest.mark.postgres
def test_compactions_racing_writers_in_separate_processes_lose_nothing(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Four writer processes change the READY rows of 48 lots (six keys a dataset) through every
    path while two processes compact the same keys over and over (from before the writers start to
    after they end): no process fails (a deadlock, a lock wait that errs), the compactors merged
    the writers' rows, and the sums equal a fresh count."""
    url = fresh_url(request, "postgresql")
    with Lineage.over(Store(url)) as lineage:
        world = LotWorld(lineage)
        world.job("land", output="raw")
        world.job("clean", output="cleaned", inputs=["raw"])
        world.produce("land", *LOTS[:30])
        with lineage.store.read() as connection:
            ids = [str(i) for i in connection.execute(sa.select(datasets.c.id)).scalars()]
        forked = separate_processes()
        out = str(tmp_path)
        compactors = [
            forked.Process(target=count_workers.compact, args=(url, ids, FIRST_KEY, LAST_KEY, f"c{n}", out))
            for n in range(2)
        ]
        writers = [
            forked.Process(target=count_workers.write, args=(url, world.ns, LOTS, seed, 120, out))
            for seed in range(4)
        ]
        for process in compactors:
            process.start()

        def compacting() -> bool:
            assert all(p.is_alive() for p in compactors), "a compactor ended before the writers began"
            return all((tmp_path / f"c{n}.ready").exists() for n in range(2))

        wait_until(compacting, timeout=600, every=0.05, what="the compactors to start")
        for process in writers:
            process.start()
        for process in writers:
            process.join(600)
        (tmp_path / "stop").touch()
        for process in compactors:
            process.join(600)
        assert [p.exitcode for p in [*writers, *compactors]] == [0] * 6
        merged = [json.loads((tmp_path / f"c{n}.json").read_text())["merged"] for n in range(2)]
        done = [json.loads((tmp_path / f"writer{n}.json").read_text())["done"] for n in range(4)]
        assert sum(merged) > 0 and sum(done) > 0  # the writers' deltas were merged as they came
        counted, _ = _kept_counts(lineage.store)
        assert counted == _fresh_counts(lineage.store)
        assert sum(counted.values()) > 0
