"""What a dataset's existing lots say, and a pipeline's declarations checked against them.

A pipeline names its source datasets and their lot interval; ``lotline ingest`` names a dataset
and an interval. Either may be wrong (a typo, another interval), and registering it as it is
would create a dataset nobody fills or lots of a second interval. ``SourceService`` finds these
before anything is registered (``lotline run``, ``lotline worker``, ``lotline ingest``): a
refusal is one ``InvalidInput`` naming both sides and changes nothing.
"""

from __future__ import annotations

import difflib
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from lotline.coordination.claims import eligible_now
from lotline.coordination.registry import find_lot_job
from lotline.domain.errors import InvalidInput
from lotline.domain.lots import IntervalLot, parse_lot
from lotline.store.engine import Store
from lotline.store.queries import datasets, gaps, manifests, registry

#: Lots with no interval (``2023-01-01``), as shown beside intervals.
NAMED_LOTS = "named lots"
#: How many hints of a job ``eligible`` looks at.
_HINTS_LOOKED_AT = 1000
#: How many datasets of a namespace a typo is compared with.
_NEAR_CANDIDATES = 10_000


@dataclass(frozen=True)
class DeclaredDataset:
    """A dataset as a pipeline declares it: its name, its lot interval (``PT5M``, or ``NAMED_LOTS``),
    and whether a job of the same pipeline produces it."""

    name: str
    lots: str
    produced: bool


class SourceService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def lot_kind(self, namespace: str, dataset: str) -> str | None:
        """The interval of the dataset's lots (``PT5M``; ``NAMED_LOTS``), None without lots."""
        with self._store.read() as connection:
            found = datasets.dataset_id(connection, namespace, dataset)
            return None if found is None else _lot_kind(connection, found)

    def object_format(self, namespace: str, dataset: str) -> str | None:
        """The format of the objects of the dataset's latest lot (None: no lot lists any)."""
        with self._store.read() as connection:
            found = datasets.dataset_id(connection, namespace, dataset)
            last = None if found is None else gaps.last_output_lot(connection, found)
            if found is None or last is None:
                return None
            manifest = manifests.readable(connection, found, [last]).get(last)
        return manifest.objects[0].format if manifest is not None and manifest.objects else None

    def check(
        self, namespace: str, declared: Sequence[DeclaredDataset], *, require_lots: Collection[str] = ()
    ) -> None:
        """Refuse a pipeline whose datasets contradict what exists: a dataset whose lots have
        another interval than declared; a source (produced by no job of the pipeline) that nothing
        fills while a dataset of a near name is filled (a typo); a source named in
        ``require_lots`` (one the jobs about to run read) with no lots and no producer at all
        (nothing was ingested yet)."""
        with self._store.read() as connection:
            ids = {d.name: datasets.dataset_id(connection, namespace, d.name) for d in declared}
            for spec in declared:
                found = ids[spec.name]
                existing = None if found is None else _lot_kind(connection, found)
                if existing is not None and existing != spec.lots:
                    raise InvalidInput(
                        f"dataset {namespace}:{spec.name} has {existing} lots; the pipeline declares "
                        f"it with {spec.lots}: refused (change the declaration to {existing})."
                    )
            for spec in declared:
                found = ids[spec.name]
                if spec.produced or (found is not None and _filled(connection, found)):
                    continue
                near = _near(connection, namespace, spec.name, {d.name for d in declared})
                if near is not None:
                    raise InvalidInput(
                        f"source dataset {namespace}:{spec.name} has no lots and nothing produces it; "
                        f"did you mean `{near}`?"
                    )
                if spec.name in require_lots:
                    raise InvalidInput(
                        f"source dataset {namespace}:{spec.name} has no lots yet (nothing was ingested "
                        f"and no job produces it): run `lotline ingest -n {namespace} -d {spec.name} "
                        f"--create --landing FOLDER --interval {spec.lots}` first."
                    )

    def eligible(self, namespace: str, jobs: Sequence[str]) -> Mapping[str, int | None]:
        """Read only: how many lots of each job are eligible now (None: too many hints to tell).
        Lots that become eligible when an upstream job of the same run publishes are not counted."""
        found: dict[str, int | None] = {}
        with self._store.read() as connection:
            for job in jobs:
                row = registry.job_for_claims(connection, namespace, job)
                lot_job = None if row is None else find_lot_job(connection, row.id)
                found[job] = 0 if lot_job is None else eligible_now(connection, lot_job, _HINTS_LOOKED_AT)
        return found


def _lot_kind(connection: Connection, dataset_id: uuid.UUID) -> str | None:
    last = gaps.last_output_lot(connection, dataset_id)
    if last is None:
        return None
    parsed = parse_lot(last)
    return str(parsed.interval) if isinstance(parsed, IntervalLot) else NAMED_LOTS


def _filled(connection: Connection, dataset_id: uuid.UUID) -> bool:
    """Whether the dataset has lots or a producer that makes them."""
    return (
        gaps.last_output_lot(connection, dataset_id) is not None
        or registry.producer_of(connection, dataset_id) is not None
    )


def _near(connection: Connection, namespace: str, name: str, declared: set[str]) -> str | None:
    """The filled dataset of the namespace whose name is closest to ``name`` (difflib), if any."""
    listed = datasets.list_datasets(connection, namespace, _NEAR_CANDIDATES, 0).items
    names = [d.name for d in listed if d.name not in declared]
    for candidate in difflib.get_close_matches(name, names, n=5):
        found = datasets.dataset_id(connection, namespace, candidate)
        if found is not None and _filled(connection, found):
            return candidate
    return None
