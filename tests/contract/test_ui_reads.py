"""The reads the web UI filters by, on SQLite and PostgreSQL: runs by state and lot, each job's
newest run state, versions by state, journaled OpenLineage events by job, type and run, and one
lot's lot events; exact items and totals, and clear errors for bad input."""

from __future__ import annotations

import uuid

import pytest

from lotline.domain.errors import InvalidInput, NotFound
from lotline.domain.manifests import LotEventKind
from lotline.domain.openlineage import run_uuid
from lotline.domain.runs import RunState
from lotline.domain.versions import VersionState
from lotline.services import Lineage
from support.lots import LotWorld
from support.ol import run_event


def hour(n: int) -> str:
    return f"20230101PT1H{n:03d}"


def _run(world: LotWorld, job: str, lot: str, *, ok: bool = True) -> uuid.UUID:
    claim = world.claim(job, lot)
    assert claim is not None
    if ok:
        world.lots.complete(claim)
    else:
        world.lots.fail(claim, error="ValueError: bad line")
    return claim.run_id


@pytest.fixture
def world(lineage: Lineage) -> LotWorld:
    """land: hours 0-4, hour 0 invalidated and made again. clean: 0-2 completed, 3 failed then
    completed, 4 running. report: registered, never run."""
    world = LotWorld(lineage)
    world.job("land", output="raw")
    world.job("clean", output="cleaned", inputs=["raw"])
    world.job("report", output="reports", inputs=["cleaned"])
    for n in range(5):
        _run(world, "land", hour(n))
    world.lots.invalidate(world.ns, "raw", hour(0))
    _run(world, "land", hour(0))
    for n in range(3):
        _run(world, "clean", hour(n))
    _run(world, "clean", hour(3), ok=False)
    _run(world, "clean", hour(3))
    assert world.claim("clean", hour(4)) is not None
    return world


def _runs(world: LotWorld, **filters: object) -> tuple[list[tuple[str | None, str]], int]:
    page = world.lineage.runs.list_runs(world.ns, "clean", **filters)  # type: ignore[arg-type]
    return [(r.lot, r.state.value) for r in page.items], page.total_count


def test_runs_by_state_and_lot(world: LotWorld) -> None:
    assert _runs(world) == (
        [
            (hour(4), "RUNNING"),
            (hour(3), "COMPLETED"),
            (hour(3), "FAILED"),
            (hour(2), "COMPLETED"),
            (hour(1), "COMPLETED"),
            (hour(0), "COMPLETED"),
        ],
        6,
    )
    assert _runs(world, states=[RunState.FAILED]) == ([(hour(3), "FAILED")], 1)
    assert _runs(world, states=[RunState.RUNNING, RunState.FAILED]) == (
        [(hour(4), "RUNNING"), (hour(3), "FAILED")],
        2,
    )
    assert _runs(world, lot=hour(3)) == ([(hour(3), "COMPLETED"), (hour(3), "FAILED")], 2)
    assert _runs(world, lot=hour(3), states=[RunState.COMPLETED]) == ([(hour(3), "COMPLETED")], 1)
    assert _runs(world, states=[RunState.COMPLETED], limit=2, offset=1) == (
        [(hour(2), "COMPLETED"), (hour(1), "COMPLETED")],
        4,
    )
    assert _runs(world, states=[RunState.ABORTED]) == ([], 0)
    assert _runs(world, lot=hour(9)) == ([], 0)


def test_run_filters_reject_bad_input(world: LotWorld) -> None:
    runs = world.lineage.runs
    with pytest.raises(InvalidInput, match="out of range"):
        runs.list_runs(world.ns, "clean", lot="20230101PT1H099")
    with pytest.raises(InvalidInput, match="lot id"):
        runs.list_runs(world.ns, "clean", lot="a/b")
    with pytest.raises(InvalidInput, match="limit must be between 1 and 1000"):
        runs.list_runs(world.ns, "clean", limit=0, states=[RunState.FAILED])
    with pytest.raises(NotFound, match="nope"):
        runs.list_runs(world.ns, "nope", states=[RunState.FAILED])


def test_the_newest_run_state_of_each_job(world: LotWorld) -> None:
    names = [
        (world.ns, "land"),
        (world.ns, "clean"),
        (world.ns, "report"),
        (world.ns, "nope"),
        ("elsewhere", "land"),
    ]
    assert world.lineage.runs.latest_states([*names, (world.ns, "clean")]) == {
        (world.ns, "land"): RunState.COMPLETED,
        (world.ns, "clean"): RunState.RUNNING,
    }
    _run(world, "land", hour(5), ok=False)
    assert world.lineage.runs.latest_states([(world.ns, "land")]) == {(world.ns, "land"): RunState.FAILED}
    assert world.lineage.runs.latest_states([]) == {}


def test_many_jobs_in_one_call(lineage: Lineage) -> None:
    """More names than one statement takes (500): every job is still answered."""
    world = LotWorld(lineage)
    for n in range(3):
        world.job(f"j{n}", output=f"d{n}")
        _run(world, f"j{n}", hour(0), ok=n != 1)
    names = [(world.ns, f"absent{n}") for n in range(600)] + [(world.ns, f"j{n}") for n in range(3)]
    assert lineage.runs.latest_states(names) == {
        (world.ns, "j0"): RunState.COMPLETED,
        (world.ns, "j1"): RunState.FAILED,
        (world.ns, "j2"): RunState.COMPLETED,
    }


def _versions(world: LotWorld, dataset: str, **filters: object) -> tuple[list[tuple[str | None, str]], int]:
    page = world.lineage.versions.list_versions(world.ns, dataset, **filters)  # type: ignore[arg-type]
    return [(v.lot, v.state.value) for v in page.items], page.total_count


def test_versions_by_state(world: LotWorld) -> None:
    assert _versions(world, "raw", states=[VersionState.SUPERSEDED]) == ([(hour(0), "superseded")], 1)
    assert _versions(world, "raw", states=[VersionState.CURRENT])[1] == 5
    assert _versions(world, "raw", lot=hour(0)) == ([(hour(0), "current"), (hour(0), "superseded")], 2)
    assert _versions(world, "raw", lot=hour(0), states=[VersionState.CURRENT]) == ([(hour(0), "current")], 1)
    assert _versions(world, "cleaned", states=[VersionState.FAILED]) == ([(hour(3), "failed")], 1)
    assert _versions(world, "cleaned", states=[VersionState.FAILED, VersionState.SUPERSEDED]) == (
        [(hour(3), "failed")],
        1,
    )
    current = _versions(world, "cleaned", states=[VersionState.CURRENT])
    assert current == (
        [(hour(3), "current"), (hour(2), "current"), (hour(1), "current"), (hour(0), "current")],
        4,
    )
    assert _versions(world, "cleaned", states=[VersionState.CURRENT], limit=1, offset=1) == (
        [(hour(2), "current")],
        4,
    )
    assert _versions(world, "reports", states=[VersionState.CURRENT]) == ([], 0)
    with pytest.raises(NotFound, match="nope"):
        world.lineage.versions.list_versions(world.ns, "nope", states=[VersionState.CURRENT])


NS = "ol"
RUN_A, RUN_B, RUN_C = str(uuid.uuid4()), "not-a-uuid-run", str(uuid.uuid4())


@pytest.fixture
def journal(lineage: Lineage) -> Lineage:
    for event in [
        run_event(NS, "a", RUN_A, "START", second=1),
        run_event(NS, "a", RUN_A, "COMPLETE", second=4),
        run_event(NS, "b", RUN_B, "START", second=2),
        run_event(NS, "b", RUN_B, "FAIL", second=5),
        run_event("other", "a", RUN_C, "START", second=3),
    ]:
        assert lineage.openlineage.accept(event) is True
    return lineage


def _events(lineage: Lineage, **filters: object) -> tuple[list[tuple[str, str, str]], int]:
    page = lineage.openlineage.list_events(**filters)  # type: ignore[arg-type]
    return [(e["job"]["namespace"], e["job"]["name"], e["eventType"]) for e in page.items], page.total_count


def test_events_by_job_type_and_run(journal: Lineage) -> None:
    assert _events(journal)[1] == 5
    assert _events(journal, job_name="a") == (
        [(NS, "a", "COMPLETE"), ("other", "a", "START"), (NS, "a", "START")],
        3,
    )
    assert _events(journal, job_namespace=NS, job_name="a") == (
        [(NS, "a", "COMPLETE"), (NS, "a", "START")],
        2,
    )
    assert _events(journal, job_namespace="other") == ([("other", "a", "START")], 1)
    assert _events(journal, event_type="FAIL") == ([(NS, "b", "FAIL")], 1)
    assert _events(journal, event_type="START", job_namespace=NS) == (
        [(NS, "b", "START"), (NS, "a", "START")],
        2,
    )
    assert _events(journal, run_id=run_uuid(RUN_B)) == ([(NS, "b", "FAIL"), (NS, "b", "START")], 2)
    assert _events(journal, run_id=uuid.UUID(RUN_C)) == ([("other", "a", "START")], 1)
    assert _events(journal, run_id=uuid.uuid4()) == ([], 0)
    assert _events(journal, event_type="ABORT") == ([], 0)
    assert _events(journal, job_name="a", limit=1, offset=1) == ([("other", "a", "START")], 3)


def test_event_filters_reject_bad_input(journal: Lineage) -> None:
    for bad in ("EXPLODE", "start", ""):
        with pytest.raises(InvalidInput, match="eventType must be one of START, RUNNING, COMPLETE, FAIL"):
            journal.openlineage.list_events(event_type=bad)
    with pytest.raises(InvalidInput, match="limit"):
        journal.openlineage.list_events(limit=0, job_name="a")


def test_the_events_of_one_lot_newest_first(world: LotWorld) -> None:
    events = world.lineage.lot_events
    found = events.of_lot(world.ns, "raw", hour(0))
    assert [(e.kind, e.dataset, e.lot) for e in found] == [
        (LotEventKind.READY, "raw", hour(0)),
        (LotEventKind.REOPENED, "raw", hour(0)),
        (LotEventKind.READY, "raw", hour(0)),
    ]
    positions = [e.position for e in found]
    assert positions == sorted(positions, reverse=True)
    current = world.lineage.versions.current_version(world.ns, "raw", hour(0))
    assert current is not None and found[0].version_id == current.id
    assert [e.kind for e in events.of_lot(world.ns, "raw", hour(0), limit=2)] == [
        LotEventKind.READY,
        LotEventKind.REOPENED,
    ]
    assert [(e.kind, e.lot) for e in events.of_lot(world.ns, "cleaned", hour(3))] == [
        (LotEventKind.READY, hour(3)),
        (LotEventKind.FAILED, hour(3)),  # its first attempt failed: failures are pushed too
    ]
    assert events.of_lot(world.ns, "cleaned", hour(4)) == []  # running: nothing published
    assert events.of_lot(world.ns, "reports", hour(0)) == []


def test_lot_events_reject_bad_input(world: LotWorld) -> None:
    events = world.lineage.lot_events
    with pytest.raises(InvalidInput, match="limit must be between 1 and 1000"):
        events.of_lot(world.ns, "raw", hour(0), limit=0)
    with pytest.raises(InvalidInput, match="limit must be between 1 and 1000"):
        events.of_lot(world.ns, "raw", hour(0), limit=1001)
    with pytest.raises(InvalidInput, match="lot id"):
        events.of_lot(world.ns, "raw", "no/lot")
    with pytest.raises(NotFound, match="nope"):
        events.of_lot(world.ns, "nope", hour(0))
