"""``lotline cleanup``: what crashes leave behind in the object store, removed or repaired.

A process can die at any point of an attempt (docs/lots.md "Crash safety and cleanup"); none of
these leaves anything readable, because readers take only what a current manifest lists. What
they can leave is garbage and missing copies, which this repairs:

1. partial manifests whose objects were never removed (died between ``fail``'s commit and the
   removal): ``ManifestService.remove_partial``;
2. objects that no manifest lists (died after writing, before committing; or a claim lost while
   Spark wrote), once they are older than the longest lease plus a grace — never in the folder
   of a claim still being worked on, nor in a published (complete or empty) attempt's folder,
   where Spark's ``_SUCCESS`` and ``.crc`` files sit beside the listed objects, whatever their age;
3. manifest copies that are missing or differ from the database (the authority), and complete or
   empty copies of lots that have no readable manifest any more (reopened lots).

It also applies the retention of history: the objects of a superseded version (``attempt=1``
beside the current ``attempt=2``) are never read, and are deleted once a newer current version
of the lot replaced them longer ago than the superseded grace; the manifest stays, marked
``objects_removed_at`` (docs/lots.md). A lot reopened and not remade yet keeps its last version's
objects: no current version replaced it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from lotline.domain.errors import InvalidInput, InvalidName
from lotline.domain.manifests import Manifest, ManifestState, manifest_document
from lotline.domain.storage_names import MANIFESTS_FOLDER
from lotline.services.manifests import ManifestService
from lotline.storage.objects import StoredObject
from lotline.store.engine import Store
from lotline.store.queries import manifests as q
from lotline.store.types import utcnow

_PAGE = 500
#: How long a superseded version's objects are kept after a newer current version replaced them
#: (``LOTLINE_SUPERSEDED_GRACE``, ``lotline cleanup --superseded-grace``).
DEFAULT_SUPERSEDED_GRACE = timedelta(days=7)


@dataclass
class CleanupReport:
    dry_run: bool
    partial_removed: list[str] = field(default_factory=list)
    unlisted_deleted: int = 0
    unlisted_bytes: int = 0
    unlisted_kept_young: int = 0
    copies_written: list[str] = field(default_factory=list)
    copies_deleted: list[str] = field(default_factory=list)
    #: The superseded versions whose objects went (``ns:dataset lot L vN attempt A``).
    superseded_removed: list[str] = field(default_factory=list)
    superseded_deleted: int = 0
    superseded_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "partialManifestsRemoved": self.partial_removed,
            "supersededVersionsRemoved": self.superseded_removed,
            "supersededObjectsDeleted": self.superseded_deleted,
            "supersededBytesDeleted": self.superseded_bytes,
            "unlistedObjectsDeleted": self.unlisted_deleted,
            "unlistedBytesDeleted": self.unlisted_bytes,
            "unlistedObjectsTooYoung": self.unlisted_kept_young,
            "copiesWritten": self.copies_written,
            "copiesDeleted": self.copies_deleted,
        }


class CleanupService:
    def __init__(self, store: Store, manifests: ManifestService) -> None:
        self._store = store
        self._manifests = manifests

    def cleanup(
        self,
        *,
        grace: timedelta,
        max_lease: timedelta,
        superseded_grace: timedelta = DEFAULT_SUPERSEDED_GRACE,
        dry_run: bool = False,
        now: datetime | None = None,
    ) -> CleanupReport:
        if grace < timedelta(0) or max_lease <= timedelta(0):
            raise InvalidInput("grace must not be negative and the longest lease must be positive.")
        if superseded_grace < timedelta(0):
            raise InvalidInput("the superseded grace must not be negative.")
        now = now or utcnow()  # the wall clock: the object store's modification times are on it
        report = CleanupReport(dry_run)
        self._finish_removals(now - grace, report)
        self._remove_superseded(now - superseded_grace, now, report)
        self._delete_unlisted(now - max_lease - grace, report)
        self._repair_copies(report)
        return report

    def _finish_removals(self, before: datetime, report: CleanupReport) -> None:
        with self._store.read() as connection:
            stuck = q.partial_before(connection, before, 10_000)
        for manifest in stuck:
            report.partial_removed.append(f"{manifest.namespace}:{manifest.dataset} lot {manifest.lot}")
            if not report.dry_run:
                self._manifests.remove_partial(manifest.id)

    def _remove_superseded(self, before: datetime, now: datetime, report: CleanupReport) -> None:
        """Delete the objects of versions superseded by a current one before ``before`` (their own
        attempt folders, Spark's leftovers included, and their parts'), then mark their manifests.
        Deleting again is harmless, so a crash between the two is repaired by the next run. Objects
        another manifest still lists and a live claim's folder are never touched."""
        storage = self._manifests.storage
        prefix = storage.root.rstrip("/") + "/"
        with self._store.read() as connection:
            versions = q.superseded_before(connection, prefix, before, 10_000)
            if not versions:
                return
            parts = q.superseded_parts(connection, prefix, before)
            going = [*versions, *parts]
            ids = {m.id for m in going}
            kept = q.listed_uris(connection, prefix, ids)
            live = {
                uri for uri in (_placed(storage.attempt_uri, *a) for a in q.live_attempts(connection)) if uri
            }
        sizes: dict[str, int] = {}
        for manifest in going:
            sizes.update((o.uri, o.size) for o in manifest.objects if o.uri.startswith(prefix))
            if manifest.location.startswith(prefix) and "/attempt=" in manifest.location:
                sizes.update((o.uri, o.size) for o in storage.objects_under(manifest.location))
        doomed = {uri: size for uri, size in sizes.items() if uri not in kept and not _in_any(uri, live)}
        report.superseded_removed = [
            f"{m.namespace}:{m.dataset} lot {m.lot} v{m.version_number} attempt {m.attempt}" for m in versions
        ]
        report.superseded_deleted = len(doomed)
        report.superseded_bytes = sum(doomed.values())
        if report.dry_run:
            return
        storage.delete(doomed)
        for manifest in going:
            if manifest.location.startswith(prefix):
                storage.delete_empty_folders(manifest.location)
        with self._store.write() as connection:
            q.mark_objects_removed(connection, [m.id for m in going], now)

    def _delete_unlisted(self, older_than: datetime, report: CleanupReport) -> None:
        storage = self._manifests.storage
        prefix = storage.root.rstrip("/") + "/"
        with self._store.read() as connection:
            listed = q.listed_uris(connection, prefix, frozenset())
            attempts = [_placed(storage.attempt_uri, *attempt) for attempt in q.live_attempts(connection)]
            # A claim's folder (in progress) and a published attempt's folder are never garbage.
            kept = {uri for uri in attempts if uri is not None} | q.published_locations(connection, prefix)
        garbage: list[StoredObject] = []
        for found in storage.objects_under(storage.root):
            relative = found.uri[len(storage.root) + 1 :]
            if f"/{MANIFESTS_FOLDER}/" in f"/{relative}" or found.uri in listed:
                continue
            if _in_any(found.uri, kept):
                continue
            if found.modified_at >= older_than:
                report.unlisted_kept_young += 1
                continue
            garbage.append(found)
        report.unlisted_deleted = len(garbage)
        report.unlisted_bytes = sum(g.size for g in garbage)
        if not report.dry_run:
            storage.delete(g.uri for g in garbage)

    def _repair_copies(self, report: CleanupReport) -> None:
        storage = self._manifests.storage
        owned: set[str] = set()
        after: uuid.UUID | None = None
        while True:
            with self._store.read() as connection:
                page = q.copy_owners(connection, after, _PAGE)
            for manifest in page:
                uri = _placed(storage.manifest_copy_uri, manifest)
                if uri is None:
                    continue
                owned.add(uri)
                if not _copy_matches(self._manifests, manifest, uri):
                    report.copies_written.append(uri)
                    if not report.dry_run:
                        storage.write_manifest_copy(manifest)
            if len(page) < _PAGE:
                break
            after = page[-1].id
        published = (f"/state={ManifestState.COMPLETE.value}/", f"/state={ManifestState.EMPTY.value}/")
        for found in storage.objects_under(storage.root):
            if f"/{MANIFESTS_FOLDER}/" not in found.uri or found.uri in owned:
                continue
            if any(marker in found.uri for marker in published):  # a reopened lot's copy
                report.copies_deleted.append(found.uri)
                if not report.dry_run:
                    storage.delete([found.uri])


def _in_any(uri: str, folders: set[str]) -> bool:
    """Whether ``uri`` lies in one of ``folders``: each of its parent folders is looked up once."""
    parent = uri
    while "/" in parent:
        parent = parent.rsplit("/", 1)[0]
        if parent in folders:
            return True
    return False


def _placed(place: Callable[..., str], *args: Any) -> str | None:
    """``place(*args)``, or None for a dataset named before storage names were checked (issue 29
    §4): it has no place in storage, and cleanup goes on with the others."""
    try:
        return place(*args)
    except InvalidName:
        return None


def _copy_matches(manifests: ManifestService, manifest: Manifest, uri: str) -> bool:
    storage = manifests.storage
    if not storage.exists(uri):
        return False
    try:
        return bool(storage.read_manifest_copy(uri) == json.loads(json.dumps(manifest_document(manifest))))
    except ValueError:
        return False
