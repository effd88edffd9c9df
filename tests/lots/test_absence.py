"""Absence told (SPEC §5 "Absence and freshness") on SQLite and PostgreSQL, with an injected clock:
an hour the sender never sent is missing in the gap report, the grid and the start page's health,
its consumer's lot is blocked on it, lots not due yet are pending, the arrival pass pushes one
OVERDUE event, a late delivery closes it; a source that stops shows its missing lots up to now; a
source whose policy says ``absent=empty`` has its quiet hours declared empty by the pass."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lotline.domain.arrival import Absence
from lotline.domain.clock import ManualClock
from lotline.domain.gaps import GapState
from lotline.domain.grid import CellState
from lotline.domain.ingress import TimeRule
from lotline.domain.lots import Interval
from lotline.domain.manifests import LotEventKind
from lotline.services import Lineage
from lotline.services.ingest import IngestRequest, ingest_job
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support import arrival_workers
from support.lots import LotWorld
from support.processes import separate_processes

NS = "absence"
DAY = datetime(2026, 3, 2, tzinfo=UTC)
PT1H = Interval.parse("PT1H")
BY_PATH = TimeRule.parse(r"path:(?P<year>\d{4})(?P<month>\d\d)(?P<day>\d\d)T(?P<hour>\d\d)")
NEVER_SENT = 6


def hour(n: int) -> str:
    return f"20260302PT1H{n:03d}"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(DAY + timedelta(hours=10, minutes=15))  # hour 9 is due (10:00 + PT5M)


@pytest.fixture
def world(backend_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[Lineage]:
    lineage = Lineage.over(Store(backend_url), Storage(str(tmp_path / "warehouse")), clock=clock)
    yield lineage
    lineage.close()


def _land(folder: Path, *hours: int) -> None:
    folder.mkdir(exist_ok=True)
    for n in hours:
        (folder / f"20260302T{n:02d}.log").write_text(f"hour {n}\n")


def _ingest(lineage: Lineage, folder: Path, clock: ManualClock, **more: object) -> object:
    request = IngestRequest(NS, "raw", str(folder), PT1H, BY_PATH, **more)  # type: ignore[arg-type]
    return lineage.ingest.ingest(request, now=clock.now())


def test_an_hour_never_sent_is_missing_everywhere_and_pushed_once(
    world: Lineage, clock: ManualClock, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    early = ManualClock(DAY + timedelta(hours=3, minutes=15))  # the sender's first hours, ingested then
    _land(landing, 0, 1, 2)
    _ingest(world, landing, early)  # declares the source's policy: its watch starts at 03:00
    _land(landing, *[n for n in range(3, 10) if n != NEVER_SENT])
    report = _ingest(world, landing, clock)
    assert (report.registered, report.empty, report.missing) == (  # type: ignore[attr-defined]
        [hour(n) for n in range(3, 10) if n != NEVER_SENT],
        {},
        [hour(NEVER_SENT)],  # due with nothing delivered: nothing registered, reported missing
    )
    LotWorld(world, NS).job("parse", output="hits", inputs=["raw"])

    raw = world.gaps.report(NS, dataset="raw")  # from the first lot up to now
    assert (raw.start, raw.end) == (DAY, clock.now())
    assert {s.value: n for s, n in raw.counts.items() if n} == {"complete": 9, "missing": 1, "pending": 1}
    assert [(r.state, r.first) for r in raw.runs] == [
        (GapState.MISSING, hour(NEVER_SENT)),
        (GapState.PENDING, hour(10)),  # 10:00-11:00 is not over: not due, not trouble
    ]
    parse = world.gaps.report(NS, job="parse")
    blocked = [r for r in parse.runs if r.state is GapState.BLOCKED]
    assert [(r.first, r.cause.dataset, r.cause.state) for r in blocked if r.cause] == [
        (hour(NEVER_SENT), "raw", GapState.MISSING)
    ]
    assert parse.counts[GapState.PENDING] == 1 and parse.counts[GapState.MISSING] == 9

    grid = world.gaps.grid(NS, dataset="raw", start="2026-03-02", end=clock.now().isoformat())
    states = {cell.lot: cell.state for cell in grid.cells}
    assert states[hour(NEVER_SENT)] is CellState.MISSING and states[hour(5)] is CellState.COMPLETE
    health = {h.job: h for h in world.gaps.namespace_health(NS, now=clock.now())}
    assert health[ingest_job("raw")].totals[CellState.MISSING] == 1
    assert health[ingest_job("raw")].range is not None and health[ingest_job("raw")].range.to_now

    first = world.arrival_pass.notice()
    assert first.overdue == [(NS, "raw", hour(NEVER_SENT))]
    assert world.arrival_pass.notice().overdue == []  # one event per lot, however many passes
    overdue = [e for e in world.lot_events.after(0) if e.kind is LotEventKind.OVERDUE]
    assert [(e.dataset, e.lot) for e in overdue] == [("raw", hour(NEVER_SENT))]

    clock.advance(timedelta(hours=1))  # hour 10 is due now, and nothing came
    assert world.arrival_pass.notice().overdue == [(NS, "raw", hour(10))]

    _land(landing, NEVER_SENT)  # the sender delivers the hour late: its READY closes the OVERDUE
    assert _ingest(world, landing, clock).registered == [hour(NEVER_SENT)]  # type: ignore[attr-defined]
    events = [(e.kind, e.lot) for e in world.lot_events.after(overdue[0].position)]
    assert (LotEventKind.READY, hour(NEVER_SENT)) in events
    after = world.gaps.report(NS, dataset="raw")
    assert [(r.state, r.first, r.count) for r in after.runs] == [
        (GapState.MISSING, hour(10), 1),
        (GapState.PENDING, hour(11), 1),
    ]


def test_a_source_that_stopped_shows_its_missing_lots_up_to_now(
    world: Lineage, clock: ManualClock, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    _land(landing, 0, 1, 2)
    _ingest(world, landing, clock)
    clock.advance(timedelta(days=1))  # nothing since 03:00 yesterday; now 10:15 the next day
    health = {h.job: h for h in world.gaps.namespace_health(NS, now=clock.now())}[ingest_job("raw")]
    assert health.totals == {CellState.COMPLETE: 3, CellState.MISSING: 31, CellState.PENDING: 1}
    counted, _ = world.gaps.counted(NS, dataset="raw")
    assert counted.counts[GapState.MISSING] == 31 and counted.end == clock.now()


def test_a_job_whose_lots_all_lie_after_now_has_none_due(world: Lineage, clock: ManualClock) -> None:
    """Lots registered ahead of the clock (a forecast, a skewed sender): nothing is due yet, and
    the namespace's health (the start page, /metrics) says so instead of refusing the range."""
    ahead = LotWorld(world, "ahead")
    ahead.job("forecast", output="forecasts")
    ahead.produce("forecast", f"{clock.now() + timedelta(days=2):%Y%m%d}P1D000")
    [health] = world.gaps.namespace_health("ahead", now=clock.now())
    assert health.range is not None and health.range.empty and health.totals == {}


def test_an_absent_empty_source_has_its_quiet_hours_declared_empty_by_the_pass(
    world: Lineage, clock: ManualClock, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    _land(landing, 0, 1)
    early = ManualClock(DAY + timedelta(hours=2, minutes=15))  # the policy declared then: watched from 02:00
    report = _ingest(world, landing, early, absent=Absence.EMPTY)
    assert report.empty == {}  # type: ignore[attr-defined]  # no quiet hour between the files
    LotWorld(world, NS).job("parse", output="hits", inputs=["raw"])
    waiting = world.gaps.report(NS, dataset="raw")
    assert (
        waiting.counts[GapState.MISSING] == 0 and waiting.counts[GapState.PENDING] == 9
    )  # 2-9: until declared
    assert world.gaps.report(NS, job="parse").counts[GapState.BLOCKED] == 0

    done = world.arrival_pass.notice()
    assert [lot for _, _, lot in done.declared_empty] == [hour(n) for n in range(2, 10)]
    assert done.overdue == []
    manifest = world.manifests.current(NS, "raw", hour(5))
    assert manifest is not None and manifest.declared_by == "arrival policy (absent=empty, late_after=PT5M)"
    settled = world.gaps.report(NS, dataset="raw")
    assert {s.value: n for s, n in settled.counts.items() if n} == {"complete": 10, "pending": 1}
    assert world.gaps.report(NS, job="parse").counts[GapState.MISSING] == 10  # its work, all eligible


def test_passes_in_separate_processes_push_each_overdue_lot_once(backend_url: str, tmp_path: Path) -> None:
    """Three processes run five passes each, at the same instant, over eight sources whose sender
    stopped: every due lot nothing was delivered for gets exactly one OVERDUE event."""
    start = DAY
    with Lineage.over(
        Store(backend_url), clock=ManualClock(start + timedelta(hours=1, minutes=5))
    ) as lineage:
        world = LotWorld(lineage, NS)
        for n in range(8):
            world.job(f"land{n}", output=f"src{n}")
            world.produce(f"land{n}", *[f"20260302PT5M{i:03d}" for i in range(12)])  # the first hour
            # Declared at 01:05, after the first hour arrived: watched from the lot 01:00-01:05 on.
            lineage.arrival.declare(NS, f"src{n}", Interval.parse("PT5M"), declared_in="a test")
    at = (start + timedelta(hours=3)).isoformat()  # 01:00-02:55 due (PT5M late) and missing: 23 lots a source
    forked = separate_processes()
    outs = [tmp_path / f"pass{n}.json" for n in range(3)]
    processes = [
        forked.Process(target=arrival_workers.passes, args=(backend_url, at, 5, str(out))) for out in outs
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(300)
    assert [p.exitcode for p in processes] == [0, 0, 0]
    pushed = [lot for out in outs for lot in json.loads(out.read_text())]
    expected = {f"src{n} 20260302PT5M{i:03d}" for n in range(8) for i in range(12, 35)}
    assert sorted(pushed) == sorted(expected)  # each once, whichever process pushed it
    with Lineage.over(Store(backend_url)) as lineage:
        events = [e for e in lineage.lot_events.after(0, limit=1000) if e.kind is LotEventKind.OVERDUE]
    assert sorted(f"{e.dataset} {e.lot}" for e in events) == sorted(expected)
