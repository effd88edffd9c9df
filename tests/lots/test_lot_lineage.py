"""Lot lineage (``lineage.lot_lineage.of_lot``) on SQLite and PostgreSQL: which lot versions fed a
lot through which runs, upstream and downstream, with the exact edges, depth limits, the node limit,
and clear errors for what does not exist."""

from __future__ import annotations

import uuid

import pytest

from lotline.domain.errors import InvalidInput, NotFound
from lotline.domain.lot_lineage import LotLineage, LotVersion
from lotline.domain.runs import RunState
from lotline.domain.versions import VersionState
from lotline.services import Lineage
from lotline.services import lot_lineage as lot_lineage_service
from support.lots import LotWorld


def hour(n: int) -> str:
    return f"20230101PT1H{n:03d}"


def five(n: int) -> str:
    return f"20230101PT5M{n:03d}"


def _run(world: LotWorld, job: str, lot: str, *, ok: bool = True) -> uuid.UUID:
    claim = world.claim(job, lot)
    assert claim is not None
    if ok:
        world.lots.complete(claim)
    else:
        world.lots.fail(claim)
    return claim.run_id


@pytest.fixture
def world(lineage: Lineage) -> LotWorld:
    """land -> raw -> clean -> cleaned -> report -> reports, hour lots; hours 0 and 1 of each."""
    world = LotWorld(lineage)
    world.job("land", output="raw")
    world.job("clean", output="cleaned", inputs=["raw"])
    world.job("report", output="reports", inputs=["cleaned"])
    return world


def _version(world: LotWorld, dataset: str, lot: str) -> LotVersion:
    found = world.lineage.versions.current_version(world.ns, dataset, lot)
    assert found is not None
    return LotVersion(world.ns, dataset, lot, found.id, found.number, found.state)


def _shape(found: LotLineage) -> tuple[set[str], set[str], set[tuple[str, str]]]:
    """Lots as ``dataset/lot``, runs as ``job/lot``, and edges in those names; every lot at its
    current version (version numbers count per dataset, not per lot)."""
    for v in found.lots:
        assert v.version_state is VersionState.CURRENT and v.version_id is not None
    names = {v.key: f"{v.dataset}/{v.lot}" for v in found.lots}
    names.update({r.key: f"{r.job}/{r.lot}" for r in found.runs})
    return (
        {names[v.key] for v in found.lots},
        {names[r.key] for r in found.runs},
        {(names[a], names[b]) for a, b in found.edges},
    )


def test_a_lot_of_a_two_job_chain_names_its_input_version_run_and_output(world: LotWorld) -> None:
    land_run = _run(world, "land", hour(0))
    clean_run = _run(world, "clean", hour(0))
    found = world.lineage.lot_lineage.of_lot(world.ns, "cleaned", hour(0), depth=1)
    assert found.root == _version(world, "cleaned", hour(0))
    assert found.root.version_state is VersionState.CURRENT
    assert {v.key for v in found.lots} == {found.root.key, _version(world, "raw", hour(0)).key}
    [run] = found.runs
    assert (run.id, run.namespace, run.job, run.lot, run.state) == (
        clean_run,
        world.ns,
        "clean",
        hour(0),
        RunState.COMPLETED,
    )
    assert run.started_at is not None and run.ended_at is not None
    raw = _version(world, "raw", hour(0))
    assert found.edges == tuple(sorted([(raw.key, f"r:{clean_run}"), (f"r:{clean_run}", found.root.key)]))
    assert found.truncated is False
    deeper = world.lineage.lot_lineage.of_lot(world.ns, "cleaned", hour(0), depth=2)
    assert {r.id for r in deeper.runs} == {clean_run, land_run}
    assert (f"r:{land_run}", raw.key) in deeper.edges


def test_upstream_and_downstream_to_the_depth_asked(world: LotWorld) -> None:
    for n in (0, 1):
        _run(world, "land", hour(n))
        _run(world, "clean", hour(n))
        _run(world, "report", hour(n))
    lots = world.lineage.lot_lineage
    assert _shape(lots.of_lot(world.ns, "cleaned", hour(0), depth=1)) == (
        {"raw/20230101PT1H000", "cleaned/20230101PT1H000", "reports/20230101PT1H000"},
        {"clean/20230101PT1H000", "report/20230101PT1H000"},
        {
            ("raw/20230101PT1H000", "clean/20230101PT1H000"),
            ("clean/20230101PT1H000", "cleaned/20230101PT1H000"),
            ("cleaned/20230101PT1H000", "report/20230101PT1H000"),
            ("report/20230101PT1H000", "reports/20230101PT1H000"),
        },
    )
    from_raw = lots.of_lot(world.ns, "raw", hour(1), depth=1)
    assert _shape(from_raw)[1] == {"land/20230101PT1H001", "clean/20230101PT1H001"}
    assert _shape(lots.of_lot(world.ns, "raw", hour(1), depth=2))[1] == {
        "land/20230101PT1H001",
        "clean/20230101PT1H001",
        "report/20230101PT1H001",
    }
    from_reports = lots.of_lot(world.ns, "reports", hour(1), depth=3)
    assert _shape(from_reports)[0] == {
        "raw/20230101PT1H001",
        "cleaned/20230101PT1H001",
        "reports/20230101PT1H001",
    }
    assert len(from_reports.runs) == 3 and len(from_reports.edges) == 5  # land wrote raw: no read


def test_a_downstream_run_shows_only_the_lots_of_this_lineage(world: LotWorld) -> None:
    """An hour made of twelve five-minute lots: from one of them, the hour's run and output, not the
    eleven other lots it read; from the hour, all twelve."""
    world.job("land5", output="raw5")
    world.job("hourly", output="hours", inputs=["raw5"], mapping="PT5M->PT1H")
    for n in range(12):
        _run(world, "land5", five(n))
    hourly = _run(world, "hourly", hour(0))
    lots = world.lineage.lot_lineage
    down = lots.of_lot(world.ns, "raw5", five(4), depth=1)
    assert _shape(down) == (
        {"raw5/20230101PT5M004", "hours/20230101PT1H000"},
        {"land5/20230101PT5M004", "hourly/20230101PT1H000"},
        {
            ("land5/20230101PT5M004", "raw5/20230101PT5M004"),
            ("raw5/20230101PT5M004", "hourly/20230101PT1H000"),
            ("hourly/20230101PT1H000", "hours/20230101PT1H000"),
        },
    )
    up = lots.of_lot(world.ns, "hours", hour(0), depth=1)
    assert [r.id for r in up.runs] == [hourly]
    assert sorted(v.lot for v in up.lots if v.dataset == "raw5") == [five(n) for n in range(12)]
    assert len(up.edges) == 13


def test_a_reprocessed_lot_is_read_at_its_current_version(world: LotWorld) -> None:
    _run(world, "land", hour(0))
    first = _run(world, "clean", hour(0))
    world.lots.invalidate(world.ns, "raw", hour(0))
    _run(world, "land", hour(0))
    second = _run(world, "clean", hour(0))
    found = world.lineage.lot_lineage.of_lot(world.ns, "cleaned", hour(0), depth=1)
    assert (found.root.version_number, found.root.version_state) == (2, VersionState.CURRENT)
    assert [r.id for r in found.runs] == [second]
    assert {(v.dataset, v.version_number) for v in found.lots} == {("raw", 2), ("cleaned", 2)}
    assert {v.key for v in found.lots} == {
        _version(world, "raw", hour(0)).key,
        _version(world, "cleaned", hour(0)).key,
    }
    # Downstream of raw 0 now: the run that read its second version, not the first clean run.
    down = world.lineage.lot_lineage.of_lot(world.ns, "raw", hour(0), depth=1)
    assert {r.job for r in down.runs} == {"land", "clean"}
    assert first not in {r.id for r in down.runs} and second in {r.id for r in down.runs}


def test_a_failed_lot_is_shown_at_its_failed_version(world: LotWorld) -> None:
    _run(world, "land", hour(0))
    failed = _run(world, "clean", hour(0), ok=False)
    found = world.lineage.lot_lineage.of_lot(world.ns, "cleaned", hour(0), depth=1)
    assert found.root.version_state is VersionState.FAILED
    [run] = found.runs
    assert (run.id, run.state) == (failed, RunState.FAILED)


def test_the_walk_stops_at_its_node_limit_and_says_so(
    world: LotWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run(world, "land", hour(0))
    _run(world, "clean", hour(0))
    _run(world, "report", hour(0))
    monkeypatch.setattr(lot_lineage_service, "MAX_NODES", 3)
    found = world.lineage.lot_lineage.of_lot(world.ns, "cleaned", hour(0), depth=3)
    assert found.truncated is True
    assert len(found.lots) + len(found.runs) <= 3
    monkeypatch.setattr(lot_lineage_service, "MAX_NODES", 6)
    whole = world.lineage.lot_lineage.of_lot(world.ns, "cleaned", hour(0), depth=3)
    assert (whole.truncated, len(whole.lots) + len(whole.runs)) == (False, 6)


@pytest.mark.parametrize(
    ("dataset", "lot", "depth", "error", "message"),
    [
        ("nope", hour(0), 3, NotFound, "nope"),
        ("cleaned", hour(5), 3, NotFound, "20230101PT1H005"),
        ("cleaned", "20230101PT1H099", 3, InvalidInput, "out of range"),
        ("cleaned", "bad/lot", 3, InvalidInput, "lot id"),
        ("cleaned", hour(0), 0, InvalidInput, "depth must be between 1 and 20"),
        ("cleaned", hour(0), 21, InvalidInput, "depth must be between 1 and 20"),
    ],
)
def test_unknown_lots_and_bad_input_are_clear_errors(
    world: LotWorld, dataset: str, lot: str, depth: int, error: type[Exception], message: str
) -> None:
    _run(world, "land", hour(0))
    _run(world, "clean", hour(0))
    with pytest.raises(error, match=message):
        world.lineage.lot_lineage.of_lot(world.ns, dataset, lot, depth=depth)


def test_an_unknown_namespace_is_not_found(lineage: Lineage) -> None:
    with pytest.raises(NotFound, match="nowhere"):
        lineage.lot_lineage.of_lot("nowhere", "raw", hour(0))
