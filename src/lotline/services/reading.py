"""Reading a dataset from outside lotline (SPEC §5): the READY lots of a range and the objects their
current manifests list, in one read transaction. Spark, Arrow, DuckDB and ``lotline files`` all
start here, so they all read the same lots."""

from __future__ import annotations

from collections.abc import Sequence

from lotline.domain.manifests import Manifest
from lotline.domain.reading import Published, ReadRange, TimeBound
from lotline.services import _common
from lotline.store.engine import Store
from lotline.store.queries import manifests as q


class ReadingService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def published(
        self, namespace: str, dataset: str, start: TimeBound = None, end: TimeBound = None
    ) -> Published:
        """The dataset's READY lots whose windows meet ``[start, end)`` (either open: None), each
        with its current manifest. A bad range or an unknown dataset raises before anything is read."""
        span = ReadRange.parse(start, end)
        low, high = span.id_bounds()
        with self._store.read() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            found = tuple(m for m in q.published(connection, dataset_id, low, high) if span.holds(m.lot))
            sample = None
            if not any(m.objects for m in found):
                newest = q.newest_with_data(connection, dataset_id)
                sample = None if newest is None else newest.objects[0]
        return Published(namespace, dataset, span, found, sample)

    def published_among(self, namespace: str, dataset: str, lots: Sequence[str]) -> dict[str, Manifest]:
        """The current manifest of each of ``lots`` that is READY (the others are not read), by lot."""
        keys = [_common.lot_key(lot) for lot in lots]
        with self._store.read() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            return q.published_among(connection, dataset_id, keys)
