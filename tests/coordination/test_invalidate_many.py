"""A backfill's set-wise invalidation (``LotService.invalidate_many``) leaves every row, hint, run
and version as invalidating the same lots one by one does; a lot it cannot reopen changes nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from lotline.domain.errors import Conflict
from lotline.domain.manifests import ManifestState
from lotline.domain.runs import RunState
from lotline.storage.objects import LIST_COPIES_FROM
from lotline.store.schema import jobs, lot_frontier, namespaces
from support.lots import LotWorld

LOTS = ["1", "2", "3", "4"]


def _scene(world: LotWorld) -> object:
    """A -> B -> C over lots 1-4: C made 1 and 2, B's lot 2 held, A's lot 3 already reopened (so
    B's too), B running on lot 4 (its claim is revoked). Returns B's running claim's run."""
    world.job("JobA", output="DataA")
    world.job("JobB", inputs=["DataA"], output="DataB")
    world.job("JobC", inputs=["DataB"], output="DataC")
    world.produce("JobA", *LOTS)
    for lot in ("1", "2", "3"):
        claim = world.claim("JobB", lot)
        assert claim is not None
        world.lots.complete(claim)
    for lot in ("1", "2"):
        claim = world.claim("JobC", lot)
        assert claim is not None
        world.lots.complete(claim)
    world.lots.hold_lot(world.ns, "DataB", "2")
    world.lots.invalidate(world.ns, "DataA", "3")
    running = world.claim("JobB", "4")
    assert running is not None
    return running.run_id


def _hints(world: LotWorld) -> set[tuple[str, str]]:
    query = (
        select(jobs.c.name, lot_frontier.c.lot)
        .join(jobs, jobs.c.id == lot_frontier.c.job_id)
        .join(namespaces, namespaces.c.id == jobs.c.namespace_id)
        .where(namespaces.c.name == world.ns)
    )
    with world.lineage.store.read() as connection:
        return {(job, lot) for job, lot in connection.execute(query)}


def _state(world: LotWorld) -> tuple[object, ...]:
    versions = {
        (d, lot): world.current_version_run(d, lot) is None
        for d in ("DataA", "DataB", "DataC")
        for lot in LOTS
    }
    return world.table(), _hints(world), versions


def test_invalidating_many_lots_at_once_is_invalidating_them_one_by_one(world: LotWorld) -> None:
    one_by_one, at_once = world, LotWorld(world.lineage, "at_once")
    revoked = [_scene(one_by_one), _scene(at_once)]
    found = [r for lot in LOTS for r in one_by_one.lots.invalidate(one_by_one.ns, "DataA", lot)]
    made = at_once.lots.invalidate_many(at_once.ns, "DataA", LOTS)
    assert sorted((r.name, r.lot) for r in made) == sorted((r.name, r.lot) for r in found)
    assert len(made) == 7  # A 1, 2, 4; B 1, 2 (held), 4 not (it was running); C 1, 2
    assert _state(at_once) == _state(one_by_one)
    assert one_by_one.status("DataB", "2", "JobB") == "HOLD"  # reopened when released
    for run_id in revoked:
        assert world.lineage.runs.get_run(run_id).state is RunState.FAILED
    assert at_once.lots.invalidate_many(at_once.ns, "DataA", LOTS) == []  # already reopened: no-op


def test_invalidating_many_lots_refuses_all_of_them_for_one_that_is_not_ready(world: LotWorld) -> None:
    world.job("JobA", output="DataA")
    world.job("JobB", inputs=["DataA"], output="DataB")
    world.produce("JobA", "1", "2")
    before = world.table()
    with pytest.raises(Conflict, match=r"Lot 9 .* has never been produced"):
        world.lots.invalidate_many(world.ns, "DataA", ["1", "9", "2"])
    assert world.table() == before
    assert world.status("DataA", "1", "JobA") == "READY"


def test_the_copies_a_backfill_withdraws_are_where_each_lot_copy_is(world: LotWorld) -> None:
    storage = world.lineage.storage
    lots = ["20230101PT5M000", "7"]
    expected = [
        storage.copy_uri("a.b", "sales/daily", lot, state, 0)
        for lot in lots
        for state in (ManifestState.COMPLETE, ManifestState.EMPTY)
    ]
    assert storage.current_copy_uris("a.b", "sales/daily", lots) == expected


@pytest.mark.parametrize("count", [3, LIST_COPIES_FROM])  # each checked; the dataset's copies listed
def test_the_copies_a_backfill_withdraws_are_those_that_exist(world: LotWorld, count: int) -> None:
    storage = world.lineage.storage
    lots = [f"20230101PT5M{n:03d}" for n in range(count)]
    written = [storage.copy_uri("a.b", "sales/daily", lots[1], ManifestState.EMPTY, 0)]
    written.append(storage.copy_uri("a.b", "sales/daily", lots[-1], ManifestState.COMPLETE, 0))
    for uri in [*written, storage.copy_uri("a.b", "sales/other", lots[0], ManifestState.COMPLETE, 0)]:
        storage.write_bytes(uri, b"{}")
    assert storage.existing_copy_uris("a.b", "sales/daily", lots) == written
    assert storage.existing_copy_uris("a.b", "sales/none", lots) == []
