"""Manifests as readers and operators use them: a lot's readable manifest, its history, and the
removal of what failed attempts wrote (SPEC §5)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from lotline.coordination import operator
from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.coordination import ArcState
from lotline.domain.errors import InvalidName, NotFound
from lotline.domain.manifests import Manifest, ManifestState, check_manifest_transition
from lotline.domain.model import DatasetRef
from lotline.services import _common
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from lotline.store.queries import claims as claim_rows
from lotline.store.queries import manifests as q

log = logging.getLogger(__name__)


class ManifestService:
    def __init__(self, store: Store, storage: Storage, clock: Clock = SYSTEM_CLOCK) -> None:
        self._store = store
        self._clock = clock
        self.storage = storage

    def current(self, namespace: str, dataset: str, lot: str) -> Manifest | None:
        """The manifest a reader of the lot takes: the one of the lot's current version, which
        exists exactly when the lot is READY (None otherwise)."""
        return self.readable(namespace, dataset, [lot]).get(_common.lot_key(lot))

    def readable(self, namespace: str, dataset: str, lots: Sequence[str]) -> dict[str, Manifest]:
        """The readable manifest of each of ``lots`` that has one (one read for many lots)."""
        keys = [_common.lot_key(lot) for lot in lots]
        with self._store.read() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            return q.readable(connection, dataset_id, keys)

    def history(self, namespace: str, dataset: str, lot: str) -> list[Manifest]:
        """Every manifest of a lot, oldest first: complete ones later superseded, partial, removed."""
        key = _common.lot_key(lot)
        with self._store.read() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            return q.history(connection, dataset_id, key)

    def get(self, manifest_id: uuid.UUID) -> Manifest:
        with self._store.read() as connection:
            found = q.by_id(connection, manifest_id)
        if found is None:
            raise NotFound("Manifest", str(manifest_id))
        return found

    def of_run(self, run_id: uuid.UUID) -> list[Manifest]:
        with self._store.read() as connection:
            return q.of_run(connection, run_id)

    def publish_copy(self, manifest_id: uuid.UUID) -> None:
        """Write the manifest's JSON copy to the object store. The database stays the authority: a
        copy that fails to be written is logged and rewritten by cleanup (``lotline cleanup``)."""
        manifest = self.get(manifest_id)
        try:
            self.storage.write_manifest_copy(manifest)
        except InvalidName as error:  # a dataset named before names were checked (issue 29 §4)
            log.warning("manifest %s: its copy has no place in storage (%s)", manifest.id, error)
        except OSError as error:
            log.warning(
                "manifest %s: its copy could not be written (%s); cleanup rewrites it", manifest.id, error
            )

    def withdraw_copies(self, namespace: str, dataset: str, lot: str) -> None:
        """A reopened lot has no readable manifest: its complete or empty copy goes too, so that
        tools reading the object store alone stop reading it (cleanup retries a failed delete)."""
        try:
            uris = [
                self.storage.copy_uri(namespace, dataset, lot, state, 0)
                for state in (ManifestState.COMPLETE, ManifestState.EMPTY)
            ]
        except InvalidName:
            return  # a name that cannot be stored (a lineage-only dataset) has no copies
        try:
            self.storage.delete(uris)
        except OSError as error:
            log.warning(
                "%s:%s lot %s: copy not withdrawn (%s); cleanup deletes it", namespace, dataset, lot, error
            )

    def withdraw_copies_many(self, refs: Sequence[DatasetRef]) -> None:
        """``withdraw_copies`` of many reopened lots, in one delete."""
        lots: dict[tuple[str, str], list[str]] = {}
        for ref in refs:
            if ref.lot:
                lots.setdefault((ref.namespace, ref.name), []).append(ref.lot)
        uris = []
        for (namespace, dataset), found in lots.items():
            try:
                uris += self.storage.existing_copy_uris(namespace, dataset, found)
            except InvalidName:
                continue  # a name that cannot be stored (a lineage-only dataset) has no copies
        try:
            self.storage.delete(uris)
        except OSError as error:
            log.warning("%d lots: copies not all withdrawn (%s); cleanup deletes them", len(refs), error)

    def remove_partial(self, manifest_id: uuid.UUID) -> Manifest:
        """Delete a partial manifest's objects, then mark it removed (and the arc partial -> missing
        if the lot is still where the failure left it). Deleting again is harmless, so a crash
        between the two steps is repaired by running this again.

        Only the attempt's own folder inside this storage is emptied: files an ingest referenced in
        place (a landing folder) are never lotline's to delete.
        """
        manifest = self.get(manifest_id)
        check_manifest_transition(manifest.state, ManifestState.REMOVED)
        self.storage.delete(self._owned(manifest))
        self.storage.delete_empty_folders(manifest.location)
        now = self._clock.now()
        with self._store.write() as connection:
            if q.set_state(connection, manifest.id, ManifestState.PARTIAL, ManifestState.REMOVED, now):
                dataset_id = _common.require_dataset(connection, manifest.namespace, manifest.dataset)
                row = claim_rows.output_row(connection, dataset_id, manifest.lot)
                if (
                    operator.arc_of(row) is ArcState.PARTIAL
                    and row is not None
                    and row.run_id == manifest.run_id
                ):
                    operator.clean(connection, [dataset_id], manifest.lot, now)
        removed = self.get(manifest_id)
        self.publish_copy(removed.id)
        return removed

    def _owned(self, manifest: Manifest) -> list[str]:
        """Everything under the attempt's location, if that location is an attempt folder of this
        storage (the attempt may have written more than it listed before it died)."""
        root = self.storage.root.rstrip("/") + "/"
        if not manifest.location.startswith(root) or "/attempt=" not in manifest.location:
            return []
        return [o.uri for o in self.storage.objects_under(manifest.location)]
