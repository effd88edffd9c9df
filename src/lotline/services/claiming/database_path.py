"""The claim path as one call of a PostgreSQL function per claim and per end of a claim
(docs/coordination.md "On PostgreSQL"), for the common case; every other case it hands to the
Python path, which it holds, before anything is written."""

from __future__ import annotations

import uuid

from lotline.coordination import claims
from lotline.domain.coordination import LotClaim
from lotline.domain.errors import InvalidInput
from lotline.services.claiming.jobs import CachedJob, JobCache
from lotline.services.claiming.path import ClaimEnd, ClaimPath, ClaimRequest, LostRace
from lotline.services.claiming.python_path import fence_of
from lotline.store.engine import Store
from lotline.store.queries import claim_functions


class DatabaseClaimPath:
    """The functions read the database's clock (a run's start and end, the lease), not a worker's."""

    def __init__(self, store: Store, jobs: JobCache, python_path: ClaimPath) -> None:
        connections = store.direct_connections
        if connections is None:
            raise InvalidInput(f"A {store.backend} database has no claim functions (PostgreSQL only).")
        self._store = store
        self._connections = connections
        self._jobs = jobs
        self._python_path = python_path

    def _covered(self, request: ClaimRequest) -> CachedJob | None:
        """The cached job, if ``lotline_claim_next_lot`` covers this request: the next lot (no named
        lot, nothing to skip) of a job with inputs and no lot mapping, not on hold, already cached."""
        cached = self._jobs.get(request.namespace, request.job)
        if request.lot is not None or request.skip or cached is None:
            return None
        lot_job = cached.lot_job
        # The function takes one OUTPUT row: a job with several outputs takes the Python path.
        single = len(lot_job.all_outputs) == 1
        return cached if single and lot_job.inputs and lot_job.mapping is None and not lot_job.held else None

    def claim(self, request: ClaimRequest) -> LotClaim | None:
        cached = self._covered(request)
        if cached is None:
            return self._python_path.claim(request)
        run_id = uuid.uuid4()
        try:
            found = claim_functions.claim_next_lot(
                self._connections,
                job_id=cached.job_id,
                stamp=cached.guard.stamp,
                version_id=cached.guard.version_id,
                output_id=cached.lot_job.output_dataset_id,
                input_ids=cached.lot_job.inputs,
                owner=request.owner,
                run_id=run_id,
                lease=request.lease,
            )
        except claim_functions.LostRace:
            raise LostRace() from None
        except claim_functions.FallBack:
            return self._python_path.claim(request)  # nothing was written
        if found is not None:
            candidate = claims.Candidate(
                found.lot, claims.input_lots(cached.lot_job, found.lot), found.attempt, found.failures
            )
            return cached.lot_claim(
                candidate, request.owner, request.namespace, request.job, run_id, found.lease_expires_at
            )
        # The guarded search found nothing: that is the answer, unless the cached job is stale.
        with self._store.read() as connection:
            current = self._jobs.load(connection, request.namespace, request.job)
        return None if current.guard == cached.guard else self._python_path.claim(request)

    def finish(self, claim: LotClaim, end: ClaimEnd) -> dict[uuid.UUID, uuid.UUID]:
        # A failure records its back-off and its FAILED event with the reason: the Python path's.
        # So does a claim with several outputs (the function publishes one), or with events to journal.
        if (
            not end.success
            or any(o.manifest is not None or o.facets for o in end.outputs)
            or end.facets
            or end.journal
            or claim.outputs
        ):
            return self._python_path.finish(claim, end)
        [output] = end.outputs  # one output (``claim.outputs`` is empty): the claim's own dataset
        try:
            claim_functions.finish_claim(
                self._connections,
                job_id=claim.job_id,
                run_id=claim.run_id,
                owner=claim.owner,
                attempt=claim.attempt,
                success=end.success,
                at=end.at,
                output_id=output.dataset_id,
                lot=claim.lot,
                version_id=output.version_id,
            )
        except claim_functions.NotLive:
            raise claims.not_live(fence_of(claim), "complete" if end.success else "fail") from None
        except claim_functions.FallBack:
            return self._python_path.finish(claim, end)  # nothing was written
        return {}
