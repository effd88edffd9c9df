"""Use cases for reading dataset versions: the current one per dataset or lot, and history."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from lotline.domain.errors import NotFound
from lotline.domain.model import DatasetVersion, Page
from lotline.domain.quality import Reported, Source, quality_facets
from lotline.domain.versions import VersionState
from lotline.services import _common
from lotline.store.engine import Store
from lotline.store.queries import runs, versions


class VersionService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def current_version(self, namespace: str, dataset: str, lot: str | None = None) -> DatasetVersion | None:
        """The version consumers read: of one lot, or (no lot) the dataset's latest successful one."""
        with self._store.read() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            return versions.current_version(
                connection, dataset_id, None if lot is None else _common.lot_key(lot)
            )

    def list_versions(
        self,
        namespace: str,
        dataset: str,
        lot: str | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        states: Sequence[VersionState] = (),
    ) -> Page[DatasetVersion]:
        """Newest first; every lot unless ``lot`` narrows it to one, every state unless ``states`` do."""
        _common.check_page(limit, offset)
        with self._store.read() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            scope = None if lot is None else _common.lot_key(lot)
            return versions.list_versions(connection, dataset_id, scope, limit, offset, states)

    def quality(self, version: DatasetVersion) -> list[Reported]:
        """The quality results reported for this version, by the run that wrote it and the runs that
        read or tested it, oldest first."""
        with self._store.read() as connection:
            reports = runs.reported_for_version(connection, version.id)
        return [
            Reported(
                Source(run_id, role, version.namespace, version.dataset, version.id, version.number), quality
            )
            for role, run_id, facets in reports
            if (quality := quality_facets(facets))
        ]

    def get_version(self, namespace: str, dataset: str, version_id: uuid.UUID) -> DatasetVersion:
        with self._store.read() as connection:
            _common.require_dataset(connection, namespace, dataset)
            found = versions.get_version(connection, version_id)
        if found is None or (found.namespace, found.dataset) != (namespace, dataset):
            raise NotFound("Dataset version", f"{namespace}:{dataset}#{version_id}")
        return found
