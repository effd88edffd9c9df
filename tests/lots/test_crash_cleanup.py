"""Crash safety with really killed processes, and what ``lotline cleanup`` repairs — on SQLite and
PostgreSQL, on a local folder and on S3 (moto's server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from lotline.domain.clock import ManualClock
from lotline.domain.coordination import ArcState, Status
from lotline.domain.manifests import ManifestDraft, ManifestState
from lotline.services import Lineage
from lotline.services.cleanup import CleanupReport
from lotline.services.lots import OutputWritten
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from lotline.store.types import utcnow
from support import crash
from support.lots import LotWorld
from support.storage import s3_options

NS = "crash"
LOT = "2023-01-01"
TESTS = Path(__file__).resolve().parent.parent


#: fsspec options of the storage under test, for the processes the tests kill.
_OPTIONS: dict[str, dict[str, object]] = {}
#: The clock of each test's services: the test moves it past the dead worker's lease.
_CLOCKS: dict[int, ManualClock] = {}


@pytest.fixture
def crash_lineage(backend_url: str, storage: Storage, request: pytest.FixtureRequest) -> Iterator[Lineage]:
    options = s3_options(request.getfixturevalue("s3_endpoint")) if storage.protocol == "s3" else {}
    _OPTIONS[storage.root] = options
    clock = ManualClock()
    service = Lineage.over(Store(backend_url), Storage(storage.root, options), clock=clock)
    _CLOCKS[id(service)] = clock
    yield service
    del _CLOCKS[id(service)]
    service.close()


def _die_at(lineage: Lineage, backend_url: str, point: str) -> None:
    root = lineage.storage.root
    arguments = [backend_url, root, json.dumps(_OPTIONS[root]), NS, "ingest", LOT, point]
    done = subprocess.run(
        [sys.executable, "-m", "support.crash", *arguments],
        env={**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -9, done.stderr[-2000:]


def _world(lineage: Lineage) -> LotWorld:
    world = LotWorld(lineage, NS)
    world.job("ingest", output="raw")
    return world


def _publish(world: LotWorld, name: str) -> ManifestDraft:
    claim = world.claim("ingest", LOT)
    assert claim is not None
    storage = world.lineage.storage
    location = storage.attempt_uri(NS, "raw", LOT, claim.attempt)
    storage.write_bytes(f"{location}/{name}", b"good\n")
    draft = ManifestDraft(location, storage.describe_written(location, format="text"))
    world.lots.complete(claim, outputs={claim.dataset: OutputWritten(draft)})
    return draft


def _reap_after_lease(lineage: Lineage) -> None:
    """The dead worker took its lease (``crash.LEASE``) on the real clock, after the services' clock
    was made: move that clock past it instead of waiting."""
    clock = _CLOCKS[id(lineage)]
    assert lineage.lots.reap() == 0  # its lease still runs
    clock.advance(utcnow() - clock.now() + crash.LEASE + timedelta(seconds=1))
    assert lineage.lots.reap() == 1


def test_killed_after_writing_leaves_nothing_visible_and_cleanup_deletes_it(
    crash_lineage: Lineage, backend_url: str
) -> None:
    lineage = crash_lineage
    world = _world(lineage)
    _die_at(lineage, backend_url, "after-write")
    dead = lineage.storage.attempt_uri(NS, "raw", LOT, 1)
    assert [o.uri for o in lineage.storage.objects_under(dead)] != []  # it did write
    assert lineage.manifests.current(NS, "raw", LOT) is None
    assert lineage.lot_events.after(0) == []
    assert world.status("raw", LOT, "ingest") == "RUNNING"

    _reap_after_lease(lineage)
    good = _publish(world, "part-0.txt")
    assert good.location.endswith("/attempt=2")
    manifest = lineage.manifests.current(NS, "raw", LOT)
    assert manifest is not None and [o.uri for o in manifest.objects] == [o.uri for o in good.objects]

    young = lineage.cleanup.cleanup(grace=timedelta(minutes=10), max_lease=timedelta(seconds=60))
    assert (young.unlisted_deleted, young.unlisted_kept_young) == (0, 2)  # too young to be garbage
    later = utcnow() + timedelta(hours=1)
    dry = lineage.cleanup.cleanup(
        grace=timedelta(0), max_lease=timedelta(seconds=60), dry_run=True, now=later
    )
    assert dry.unlisted_deleted == 2 and len(list(lineage.storage.objects_under(dead))) == 2
    report = lineage.cleanup.cleanup(grace=timedelta(0), max_lease=timedelta(seconds=60), now=later)
    assert report.unlisted_deleted == 2 and report.unlisted_bytes == 2 * len(b"half of a lot\n")
    assert list(lineage.storage.objects_under(dead)) == []
    assert all(lineage.storage.exists(o.uri) for o in manifest.objects)
    assert lineage.storage.exists(lineage.storage.manifest_copy_uri(manifest))


def test_killed_between_the_failure_and_the_removal_cleanup_finishes_it(
    crash_lineage: Lineage, backend_url: str
) -> None:
    lineage = crash_lineage
    world = _world(lineage)
    _die_at(lineage, backend_url, "before-removal")
    [partial] = lineage.manifests.history(NS, "raw", LOT)
    assert partial.state is ManifestState.PARTIAL and len(partial.objects) == 2
    assert lineage.lots.arc_state(NS, "ingest", LOT) is ArcState.PARTIAL
    assert world.status("raw", LOT, "ingest") == Status.ERROR.value

    report = lineage.cleanup.cleanup(grace=timedelta(0), max_lease=timedelta(seconds=60))
    assert len(report.partial_removed) == 1
    removed = lineage.manifests.get(partial.id)
    assert removed.state is ManifestState.REMOVED
    assert not any(lineage.storage.exists(o.uri) for o in partial.objects)
    assert lineage.lots.arc_state(NS, "ingest", LOT) is ArcState.MISSING
    assert lineage.storage.exists(lineage.storage.manifest_copy_uri(removed))


def test_copies_are_rewritten_from_the_database_and_withdrawn_when_a_lot_is_reopened(
    crash_lineage: Lineage,
) -> None:
    lineage = crash_lineage
    world = _world(lineage)
    _publish(world, "part-0.txt")
    manifest = lineage.manifests.current(NS, "raw", LOT)
    assert manifest is not None
    copy = lineage.storage.manifest_copy_uri(manifest)
    original = lineage.storage.read_bytes(copy)
    lineage.storage.delete([copy])
    report = lineage.cleanup.cleanup(grace=timedelta(0), max_lease=timedelta(seconds=60))
    assert report.copies_written == [copy]
    assert json.loads(lineage.storage.read_bytes(copy)) == json.loads(original)
    assert lineage.cleanup.cleanup(grace=timedelta(0), max_lease=timedelta(seconds=60)).copies_written == []

    lineage.lots.invalidate(NS, "raw", LOT)
    assert not lineage.storage.exists(copy)  # a reopened lot is not readable from the store either
    lineage.storage.write_bytes(copy, original)  # as if the withdrawal had failed
    report = lineage.cleanup.cleanup(grace=timedelta(0), max_lease=timedelta(seconds=60))
    assert report.copies_deleted == [copy] and not lineage.storage.exists(copy)
    assert all(lineage.storage.exists(o.uri) for o in manifest.objects)  # history keeps its objects


def test_a_live_claim_s_folder_is_never_touched(crash_lineage: Lineage) -> None:
    lineage = crash_lineage
    world = _world(lineage)
    claim = world.claim("ingest", LOT)
    assert claim is not None
    location = lineage.storage.attempt_uri(NS, "raw", LOT, claim.attempt)
    lineage.storage.write_bytes(f"{location}/in-progress.txt", b"x")
    later = utcnow() + timedelta(hours=1)
    report = lineage.cleanup.cleanup(grace=timedelta(0), max_lease=timedelta(seconds=1), now=later)
    assert report.unlisted_deleted == 0
    assert lineage.storage.exists(f"{location}/in-progress.txt")


def test_bad_input_is_refused(lineage: Lineage) -> None:
    from lotline.domain.errors import InvalidInput

    with pytest.raises(InvalidInput):
        lineage.cleanup.cleanup(grace=timedelta(seconds=-1), max_lease=timedelta(seconds=60))
    with pytest.raises(InvalidInput):
        lineage.cleanup.cleanup(grace=timedelta(0), max_lease=timedelta(0))


def test_what_spark_leaves_beside_a_published_attempt_is_not_garbage(crash_lineage: Lineage) -> None:
    """A Spark write leaves ``_SUCCESS`` and ``.crc`` files the manifest does not list (a clean run
    of 107 attempts had 321 of them reported as orphans): they belong to the published attempt."""
    lineage = crash_lineage
    world = _world(lineage)
    claim = world.claim("ingest", LOT)
    assert claim is not None
    storage = lineage.storage
    location = storage.attempt_uri(NS, "raw", LOT, claim.attempt)
    for name in ("part-00000.parquet", "_SUCCESS", ".part-00000.parquet.crc", "._SUCCESS.crc"):
        storage.write_bytes(f"{location}/{name}", b"x")
    draft = ManifestDraft(location, storage.describe_written(location, format="parquet"))
    assert [o.uri.rsplit("/", 1)[-1] for o in draft.objects] == ["part-00000.parquet"]
    world.lots.complete(claim, outputs={claim.dataset: OutputWritten(draft)})
    stray = storage.attempt_uri(NS, "raw", "2023-01-02", 1) + "/_SUCCESS"  # no manifest: garbage
    storage.write_bytes(stray, b"")
    later = utcnow() + timedelta(hours=1)
    report = lineage.cleanup.cleanup(grace=timedelta(0), max_lease=timedelta(seconds=60), now=later)
    assert report.unlisted_deleted == 1 and not storage.exists(stray)
    assert len(list(storage.objects_under(location))) == 4


def test_a_superseded_version_s_objects_go_after_the_grace_and_nothing_else(crash_lineage: Lineage) -> None:
    """A lot published, reopened and published again: after the superseded grace cleanup deletes
    attempt 1's objects (Spark's leftovers too) and marks its manifest; before it, in a dry run,
    and while the lot is reopened and not remade, it deletes nothing. The current version's objects
    and a live claim's folder are never touched."""
    lineage = crash_lineage
    clock = _CLOCKS[id(lineage)]
    storage = lineage.storage
    world = _world(lineage)
    first = _publish(world, "part-0.txt")
    storage.write_bytes(f"{first.location}/_SUCCESS", b"")  # what a Spark write leaves beside it
    old = [o.uri for o in storage.objects_under(first.location)]
    assert len(old) == 2
    week, lease = timedelta(days=7), timedelta(seconds=60)

    def cleanup(days: int, *, dry_run: bool = False) -> CleanupReport:
        return lineage.cleanup.cleanup(
            grace=timedelta(0),
            max_lease=lease,
            superseded_grace=week,
            dry_run=dry_run,
            now=clock.now() + timedelta(days=days),
        )

    lineage.lots.invalidate(NS, "raw", LOT)
    failed = world.claim("ingest", LOT)
    assert failed is not None
    lineage.lots.fail(failed, error="the remake failed")  # a newer version, but a failed one
    reopened = cleanup(30)  # no current version replaced it: kept, whatever the grace
    assert reopened.superseded_removed == [] and all(storage.exists(uri) for uri in old)

    second = _publish(world, "part-0.txt")
    assert second.location.endswith("/attempt=3")
    claim = world.claim("ingest", "2023-01-02")  # a live claim beside them
    assert claim is not None
    in_progress = f"{storage.attempt_uri(NS, 'raw', '2023-01-02', claim.attempt)}/in-progress.txt"
    storage.write_bytes(in_progress, b"x")

    young = cleanup(6)
    assert young.superseded_removed == [] and all(storage.exists(uri) for uri in old)
    dry = cleanup(8, dry_run=True)
    assert dry.superseded_removed == [f"{NS}:raw lot {LOT} v1 attempt 1"]
    assert (dry.superseded_deleted, dry.superseded_bytes) == (2, len(b"good\n"))
    assert dry.to_json()["supersededObjectsDeleted"] == 2 and all(storage.exists(uri) for uri in old)
    assert all(m.objects_removed_at is None for m in lineage.manifests.history(NS, "raw", LOT))

    done = cleanup(8)
    assert done.superseded_removed == dry.superseded_removed and done.superseded_deleted == 2
    assert not any(storage.exists(uri) for uri in old) and list(storage.objects_under(first.location)) == []
    current = lineage.manifests.current(NS, "raw", LOT)
    assert current is not None and current.location == second.location and current.objects_removed_at is None
    assert all(storage.exists(o.uri) for o in current.objects)
    assert storage.exists(in_progress)
    history = {m.attempt: m for m in lineage.manifests.history(NS, "raw", LOT)}
    gone, kept = history[1], history[3]
    assert gone.objects_removed_at == clock.now() + timedelta(days=8)
    assert [o.uri for o in gone.objects] == [o.uri for o in first.objects]  # history still lists them
    assert kept.objects_removed_at is None
    assert cleanup(9).superseded_removed == []  # done once


def test_a_bad_superseded_grace_is_refused_and_changes_nothing(crash_lineage: Lineage) -> None:
    from lotline.domain.errors import InvalidInput

    lineage = crash_lineage
    world = _world(lineage)
    first = _publish(world, "part-0.txt")
    lineage.lots.invalidate(NS, "raw", LOT)
    _publish(world, "part-0.txt")
    later = _CLOCKS[id(lineage)].now() + timedelta(days=30)
    with pytest.raises(InvalidInput, match="superseded grace"):
        lineage.cleanup.cleanup(
            grace=timedelta(0),
            max_lease=timedelta(seconds=60),
            superseded_grace=-timedelta(days=1),
            now=later,
        )
    assert all(lineage.storage.exists(o.uri) for o in first.objects)
    assert all(m.objects_removed_at is None for m in lineage.manifests.history(NS, "raw", LOT))
