"""What a worker keeps of a coordinated job between claims, and when to read it again."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import Connection

from lotline.coordination.claims import Candidate
from lotline.coordination.registry import LotJob, lot_job_of, not_coordinated
from lotline.domain.coordination import LotClaim
from lotline.domain.errors import NotFound
from lotline.domain.names import validate_name
from lotline.store.queries import datasets, frontier, registry


@dataclass(frozen=True)
class CachedJob:
    """A coordinated job as a worker needs it per claim. ``guard`` (its lot job's stamp and the
    job's current version) tells whether it is still current; ``names`` are its datasets' names."""

    job_id: uuid.UUID
    guard: frontier.Guard
    lot_job: LotJob
    names: dict[uuid.UUID, str]

    def lot_claim(
        self, candidate: Candidate, owner: str, namespace: str, job: str, run_id: uuid.UUID, expires: datetime
    ) -> LotClaim:
        """The claim of ``candidate`` as the worker holds it."""
        lot_job, names = self.lot_job, self.names
        return LotClaim(
            namespace=namespace,
            job=job,
            dataset=names[lot_job.output_dataset_id],
            lot=candidate.lot,
            input_lots=tuple((names[d], input_lot) for d, input_lot in candidate.inputs),
            owner=owner,
            job_id=self.job_id,
            dataset_id=lot_job.output_dataset_id,
            attempt=candidate.attempt,
            run_id=run_id,
            lease_expires_at=expires,
            failures=candidate.failures,
            outputs=tuple((names[d], d) for d in lot_job.outputs) if len(lot_job.outputs) > 1 else (),
        )


class JobCache:
    """Cached jobs by (namespace, job name), shared by the claim paths of one service: workers
    claim the same jobs all day, and a job's inputs and dataset names rarely change."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], CachedJob] = {}

    def get(self, namespace: str, job: str) -> CachedJob | None:
        return self._known.get((namespace, job))

    def load(self, connection: Connection, namespace: str, job: str) -> CachedJob:
        """The job from one read; its inputs and dataset names are read again only when its lot job's
        stamp changed since this cache last looked. NotFound, or a Conflict if it is not coordinated."""
        row = registry.job_for_claims(connection, namespace, validate_name("Job", job))
        if row is None:
            raise NotFound("Job", f"{namespace}:{job}")
        entry = row.entry
        if entry is None:
            raise not_coordinated(namespace, job)
        guard = frontier.Guard(entry.updated_at, row.current_version_id)
        known = self._known.get((namespace, job))
        if known is not None and known.job_id == row.id and known.guard.stamp == entry.updated_at:
            cached = CachedJob(row.id, guard, replace(known.lot_job, held=entry.held), known.names)
        else:
            lot_job = lot_job_of(connection, row.id, entry)
            refs = datasets.dataset_refs(connection, [*lot_job.all_outputs, *lot_job.inputs])
            cached = CachedJob(row.id, guard, lot_job, {d: ref.name for d, ref in refs.items()})
        self._known[(namespace, job)] = cached
        return cached
