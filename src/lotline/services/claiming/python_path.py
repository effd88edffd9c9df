"""The claim path statement by statement, in Python (docs/coordination.md "The work list"): every
case, on every database. Each claim and each end of a claim is one ``Store.write()`` transaction."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime

from sqlalchemy import Connection

from lotline.coordination import claims
from lotline.domain.clock import Clock
from lotline.domain.coordination import LotClaim
from lotline.domain.errors import Conflict
from lotline.domain.lots import IntervalLot, parse_lot
from lotline.domain.manifests import LotEventKind
from lotline.domain.model import RunIoRole
from lotline.domain.quality import quality_facets
from lotline.domain.runs import RunAction
from lotline.services import _common
from lotline.services.claiming.jobs import CachedJob, JobCache
from lotline.services.claiming.path import ClaimEnd, ClaimRequest, LostRace
from lotline.services.recording import apply_transition, create_run
from lotline.store.engine import Store
from lotline.store.queries import events, frontier, lot_events, runs, versions
from lotline.store.queries import manifests as manifest_rows


class PythonClaimPath:
    """``look_before_writing``: where writers queue for one database-wide lock (SQLite), an idle
    worker first looks for hints in a read transaction, so as not to take the lock only to find
    nothing. A job whose last claim found a lot is not idle: its next claim skips the look (one
    transaction fewer per lot of a run that goes through a backlog)."""

    def __init__(
        self, store: Store, clock: Clock, jobs: JobCache, *, look_before_writing: bool, max_attempts: int
    ) -> None:
        """``max_attempts``: failures in a row after which a lot is given up on (``announce``)."""
        self._store = store
        self._max_attempts = max_attempts
        self._clock = clock
        self._jobs = jobs
        self._look_before_writing = look_before_writing
        #: (namespace, job) whose last claim here found a lot.
        self._busy: set[tuple[str, str]] = set()

    def claim(self, request: ClaimRequest) -> LotClaim | None:
        job = (request.namespace, request.job)
        looks = request.lot is None and self._look_before_writing and job not in self._busy
        if looks and not self._may_find_work(request):
            return None
        with self._store.write() as connection:
            found = self._claim(connection, request)
        if request.lot is None:
            if found is None:
                self._busy.discard(job)
            else:
                self._busy.add(job)
        return found

    def _may_find_work(self, request: ClaimRequest) -> bool:
        with self._store.read() as connection:
            found = self._jobs.load(connection, request.namespace, request.job)
            return not found.lot_job.held and frontier.has_hints(connection, found.job_id, self._clock.now())

    def _claim(self, connection: Connection, request: ClaimRequest) -> LotClaim | None:
        cached = self._jobs.get(request.namespace, request.job) if request.lot is None else None
        if cached is not None and not cached.lot_job.held:
            # The common case: the guarded search itself checks that the cached job is current.
            candidate = claims.next_candidate(
                connection, cached.lot_job, self._clock.now(), cached.guard, skip=request.skip
            )
            if candidate is not None:
                return self._start(connection, cached, candidate, request)
        found = self._jobs.load(connection, request.namespace, request.job)
        lot_job = found.lot_job
        if lot_job.held:
            if request.lot is not None:
                raise Conflict(f"Job {request.namespace}:{request.job} is on hold; release it first.")
            return None
        if request.lot is not None:
            candidate = claims.named_candidate(connection, lot_job, request.lot)
        elif cached is not None and found.guard == cached.guard and not cached.lot_job.held:
            return None  # the guarded search above was current and found nothing
        else:
            candidate = claims.next_candidate(connection, lot_job, self._clock.now(), skip=request.skip)
        if candidate is None:
            return None
        return self._start(connection, found, candidate, request)

    def _start(
        self, connection: Connection, found: CachedJob, candidate: claims.Candidate, request: ClaimRequest
    ) -> LotClaim:
        """Create and start the claim's run, then take the lot (``LostRace`` if another worker won)."""
        # The run starts now, after the check: the take succeeds only if the lot is still as the check
        # saw it, so an earlier attempt had ended (and committed) before now; run intervals never overlap.
        if not claims.hold_rows(connection, found.lot_job, candidate):
            raise LostRace(candidate.lot)  # a row of the lot is being changed: never wait for it
        now = self._clock.now()
        run_id = uuid.uuid4()
        create_run(
            connection,
            run_id=run_id,
            job_id=found.job_id,
            job_version_id=found.guard.version_id,
            lot=candidate.lot,
            inputs=candidate.inputs,
            outputs=[(output_id, candidate.lot) for output_id in found.lot_job.all_outputs],
            started_at=now,
        )
        expires = now + request.lease
        if not claims.take(
            connection,
            found.lot_job,
            candidate,
            owner=request.owner,
            run_id=run_id,
            lease_expires_at=expires,
            now=now,
        ):
            raise LostRace(candidate.lot)
        return found.lot_claim(candidate, request.owner, request.namespace, request.job, run_id, expires)

    def finish(self, claim: LotClaim, end: ClaimEnd) -> dict[uuid.UUID, uuid.UUID]:
        """Every output of the claim is published (or failed) in this one transaction: its OUTPUT
        row (``claims.finish`` moves them all), its version (minted by the run's transition), its
        facets, its manifest and its lot event; and the run's OpenLineage events (``end.journal``),
        so that a lot's end and its lineage commit together."""
        fence = fence_of(claim)
        now = self._clock.now()
        outputs = end.outputs
        manifest_ids = {o.dataset_id: uuid.uuid4() for o in outputs if o.manifest is not None}
        with self._store.write() as connection:
            claims.finish(connection, fence, success=end.success, now=now)
            action = RunAction.COMPLETE if end.success else RunAction.FAIL
            run_row = _common.require_run(connection, claim.run_id)
            apply_transition(connection, claim.run_id, action, end.at or now, locked=run_row)
            if not end.success:
                fail_children(connection, claim.run_id, now)
                if end.error is not None:
                    runs.set_error(connection, claim.run_id, end.error, now, end.error_kind)
            else:
                for output in outputs:
                    if output.facets:
                        versions.merge_facets(connection, output.version_id, output.facets)
                    if quality := quality_facets(output.facets):  # the run page's checks, per output
                        runs.merge_io_facets(
                            connection,
                            RunIoRole.OUTPUT,
                            claim.run_id,
                            output.dataset_id,
                            [claim.lot],
                            quality,
                        )
            if end.facets:
                # The lot's window, as its nominalTime facet says (the claim left it unset).
                lot = parse_lot(claim.lot)
                window = None
                if isinstance(lot, IntervalLot) and run_row.nominal_start_time is None:
                    window = (lot.start, lot.end)
                runs.merge_run_facets(connection, run_row, end.facets, now, window=window)
            for output in outputs:
                announced = replace(fence, dataset_id=output.dataset_id)
                if end.success or output is outputs[0]:  # a failure's retry hint is the job's, once
                    claims.announce(
                        connection,
                        announced,
                        success=end.success,
                        now=now,
                        failures=claim.failures + 1,
                        max_attempts=self._max_attempts,
                    )
            if end.journal:
                events.append(connection, end.journal, now, applied=True)
            _publish(connection, claim, end, manifest_ids, now)
        return manifest_ids


def _publish(
    connection: Connection,
    claim: LotClaim,
    end: ClaimEnd,
    manifest_ids: dict[uuid.UUID, uuid.UUID],
    now: datetime,
) -> None:
    """Each output's manifest, then the lot events (READY or FAILED, one per output): last in the
    claim's end, so that event positions follow commit order."""
    outputs = end.outputs
    for output in outputs:
        if output.manifest is not None:
            manifest_rows.insert_manifest(
                connection,
                manifest_id=manifest_ids[output.dataset_id],
                state=output.manifest.state_for(success=end.success),
                dataset_id=output.dataset_id,
                lot=claim.lot,
                now=now,
                run_id=claim.run_id,
                version_id=output.version_id,
                draft=output.manifest,
                attempt=claim.attempt,
            )
    entries = [
        (o.dataset_id, claim.lot, manifest_ids.get(o.dataset_id), o.version_id, claim.run_id) for o in outputs
    ]
    if end.success:
        lot_events.append(connection, LotEventKind.READY, entries, now)
    else:
        lot_events.append(
            connection, LotEventKind.FAILED, entries, now, attempt=claim.attempt, reason=end.error
        )


def fence_of(claim: LotClaim) -> claims.Fence:
    return claims.Fence(claim.job_id, claim.dataset_id, claim.lot, claim.owner, claim.attempt, claim.run_id)


def fail_children(connection: Connection, run_id: uuid.UUID, now: datetime) -> None:
    """A lot's run that fails takes its parts still running with it (their worker is gone or gave up)."""
    for child in runs.running_children(connection, run_id):
        apply_transition(connection, child, RunAction.FAIL, now)
