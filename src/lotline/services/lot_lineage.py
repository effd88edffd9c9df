"""Lot lineage (docs/ui.md): for one lot of a dataset, the lots of its inputs that fed it through
which runs and versions, upstream, and the lots computed from it, downstream."""

from __future__ import annotations

import uuid

from sqlalchemy import Connection

from lotline.domain.errors import InvalidInput, NotFound
from lotline.domain.lot_lineage import LotLineage, LotRun, LotVersion
from lotline.domain.model import RunIoRole
from lotline.services import _common
from lotline.store.engine import Store
from lotline.store.queries import lot_lineage as q

MAX_DEPTH = 20
#: Lot versions and runs together: past this the walk stops and says so.
MAX_NODES = 2_000


class LotLineageService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def of_lot(self, namespace: str, dataset: str, lot: str, *, depth: int = 3) -> LotLineage:
        """Up to ``depth`` runs upstream and downstream of the lot's current version (else its
        newest): each run with the exact versions it read and wrote."""
        if not 1 <= depth <= MAX_DEPTH:
            raise InvalidInput(f"depth must be between 1 and {MAX_DEPTH}, got {depth}.")
        with self._store.read() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            root = q.version_of_lot(connection, dataset_id, _common.lot_key(lot))
            if root is None:
                raise NotFound("Lot version", f"{namespace}:{dataset} lot {lot}")
            return _Walk(connection, root).run(depth)


class _Walk:
    """Breadth-first, one level of runs at a time in each direction."""

    def __init__(self, connection: Connection, root: LotVersion) -> None:
        self.connection = connection
        self.root = root
        self.lots: dict[str, LotVersion] = {root.key: root}
        self.runs: dict[uuid.UUID, LotRun] = {}
        self.edges: set[tuple[str, str]] = set()
        self.truncated = False

    def run(self, depth: int) -> LotLineage:
        for upstream in (True, False):
            versions = [v for v in (self.root.version_id,) if v is not None]
            for _ in range(depth):
                found = (q.producers if upstream else q.readers)(self.connection, versions)
                new_runs = [r for r in dict.fromkeys(found) if r not in self.runs]
                if not new_runs or self._full(len(new_runs)):
                    break
                versions = self._add_runs(new_runs, RunIoRole.INPUT if upstream else RunIoRole.OUTPUT)
        return LotLineage(
            self.root,
            tuple(self.lots.values()),
            tuple(self.runs.values()),
            tuple(sorted(self.edges)),
            self.truncated,
        )

    def _full(self, adding: int) -> bool:
        if len(self.lots) + len(self.runs) + adding > MAX_NODES:
            self.truncated = True
        return self.truncated

    def _add_runs(self, run_ids: list[uuid.UUID], onward: RunIoRole) -> list[uuid.UUID]:
        """Load the runs and their reads and writes; the versions on the ``onward`` side are the
        next level of the walk. On the side the walk came from only the lots already in it count:
        what else a downstream run read (the other hours of a day) is not this lot's lineage."""
        for found in q.load_runs(self.connection, run_ids):
            self.runs[found.id] = found
        following: list[uuid.UUID] = []
        for run_id, role, lot in q.io_of_runs(self.connection, run_ids):
            if lot.key not in self.lots:
                if role != onward:
                    continue
                self.lots[lot.key] = lot
                if lot.version_id is not None:
                    following.append(lot.version_id)
            run_key = f"r:{run_id}"
            self.edges.add((lot.key, run_key) if role is RunIoRole.INPUT else (run_key, lot.key))
        return following
