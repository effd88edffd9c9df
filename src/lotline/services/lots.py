"""Use cases of lot coordination (SPEC §4, §5): claim -> run -> complete/fail, and the operator's moves.

Each use case is one ``Store.write()`` transaction, so a lot's status and its run's version
commit together: a lot is READY exactly when its run COMPLETED and its version became current.
"""

from __future__ import annotations

import traceback
import uuid
from collections.abc import Container, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row

from lotline.coordination import claims, operator
from lotline.coordination.registry import Registration, register, registration
from lotline.domain.coordination import (
    ArcState,
    LotClaim,
    LotMapping,
    LotStatus,
    Role,
    Status,
    check_owner,
    lock_of,
)
from lotline.domain.errors import Conflict, InvalidInput, NotFound
from lotline.domain.manifests import LotEventKind, ManifestDraft
from lotline.domain.model import DatasetRef, Job, Page
from lotline.domain.names import validate_name
from lotline.domain.runs import RunAction
from lotline.domain.versions import job_version_id, output_version_id
from lotline.services import _common
from lotline.services.manifests import ManifestService
from lotline.services.recording import apply_transition, create_run
from lotline.store.dialect import DriverConnections, has_stored_functions, single_writer
from lotline.store.engine import Store
from lotline.store.queries import (
    claim_functions,
    data_status,
    datasets,
    frontier,
    jobs,
    lot_events,
    runs,
    versions,
)
from lotline.store.queries import manifests as manifest_rows
from lotline.store.types import utcnow

DEFAULT_LEASE = timedelta(seconds=30)
#: The ``_producer`` of the facets lotline writes itself.
PRODUCER = "https://github.com/lotline/lotline"
#: A claim that loses a race for a lot tries the next one; this bounds the retries of one claim.
MAX_RACES = 16


class _LostRace(Exception):
    """Another worker took the lot between our search and our write: roll back and look again."""


@dataclass(frozen=True)
class _Registered:
    """A registered job as a worker needs it per claim, cached per service: ``guard`` (the
    registration's updated_at and the job's current version) tells whether it is still current."""

    job_id: uuid.UUID
    guard: frontier.Guard
    registration: Registration
    names: dict[uuid.UUID, str]


class LotService:
    def __init__(
        self, store: Store, manifests: ManifestService, *, database_functions: bool | None = None
    ) -> None:
        """``database_functions``: run a worker's common path (next lot of an unmapped job, its
        completion or failure without a manifest) as one call each of the PostgreSQL claim functions
        (docs/coordination.md) instead of statement by statement; by default wherever the database
        has them."""
        self._store = store
        self._manifests = manifests
        self._registered: dict[tuple[str, str], _Registered] = {}
        self._in_database = (
            has_stored_functions(store.engine) if database_functions is None else database_functions
        )

    # -- registering jobs ---------------------------------------------------------------------
    def register_job(
        self,
        namespace: str,
        job: str,
        *,
        output: str,
        inputs: Sequence[str] = (),
        lot_mapping: str | None = None,
        location: str | None = None,
        code_digest: str | None = None,
    ) -> Job:
        """Declare a job that produces ``output`` lot by lot from ``inputs`` (the job's catalog entry too).

        A dataset has exactly one producer: registering a second one is a Conflict and changes
        nothing. ``lot_mapping`` (e.g. ``PT5M->PT1H``) says how input lots roll up into output lots.
        ``code_digest`` (the runner's digest of the transform) enters the job version id.
        """
        validate_name("Job", job)
        mapping = LotMapping.parse(lot_mapping) if lot_mapping is not None else None
        with self._store.write() as connection:
            namespace_id = _common.require_namespace(connection, namespace)
            output_id = _common.require_dataset(connection, namespace, output)
            input_ids = [_common.require_dataset(connection, namespace, d) for d in inputs]
            now = utcnow()
            job_id = jobs.upsert_job(
                connection, namespace_id, job, type_="BATCH", description=None, now=now
            ).id
            version = job_version_id(
                namespace,
                job,
                location,
                [f"{namespace}:{d}" for d in inputs],
                [f"{namespace}:{output}"],
                code_digest,
            )
            jobs.set_current_version(
                connection, job_id, version, location=location, inputs=input_ids, outputs=[output_id], now=now
            )
            describe = {output_id: f"{namespace}:{output}"}
            describe.update({i: f"{namespace}:{d}" for i, d in zip(input_ids, inputs, strict=True)})
            register(connection, job_id, output_id, input_ids, mapping, now, describe=describe)
            found = jobs.get_job(connection, namespace, job)
        assert found is not None
        return found

    # -- the worker's side ----------------------------------------------------------------------
    def claim(
        self,
        worker: str,
        namespace: str,
        job: str,
        *,
        lot: str | None = None,
        lease: timedelta = DEFAULT_LEASE,
        skip: Container[str] = (),
    ) -> LotClaim | None:
        """Claim the next eligible lot of ``job`` (or the named ``lot``) and start a run on it.

        Returns None when nothing is eligible (or the job is on hold). A named lot that is not
        eligible is a Conflict saying why. Lots other workers hold are skipped, never waited for.
        ``skip``: output lots to pass over although eligible (a runner that gave up on them for now).
        """
        owner = check_owner(worker)
        if lease <= timedelta(0):
            raise InvalidInput(f"lease must be positive, got {lease}.")
        wanted = None if lot is None else _common.lot_key(lot)
        if wanted is None and not self._may_find_work(namespace, job):
            return None
        for _ in range(MAX_RACES):
            try:
                searched = False
                cached = self._in_database_claimable(namespace, job) if not skip else None
                if wanted is None and cached is not None:
                    try:
                        claimed = self._claim_in_database(cached, owner, namespace, job, lease)
                    except claim_functions.FallBack:
                        pass  # nothing was written: the Python path below does it all
                    else:
                        if claimed is not None:
                            return claimed
                        # The guarded search found nothing: done, unless the cache is stale (below).
                        searched = True
                with self._store.write() as connection:
                    return self._claim_once(
                        connection, owner, namespace, job, wanted, lease, searched=searched, skip=skip
                    )
            except _LostRace:
                if wanted is not None:
                    raise Conflict(f"Lot {wanted} was just claimed by another worker.") from None
        return None

    def _in_database_claimable(self, namespace: str, job: str) -> _Registered | None:
        """The cached job, if its next claim can be one call of ``lotline_claim_next_lot``."""
        cached = self._registered.get((namespace, job)) if self._in_database else None
        if cached is None:
            return None
        reg = cached.registration
        return cached if reg.inputs and reg.mapping is None and not reg.held else None

    def _driver_connections(self) -> DriverConnections:
        connections = self._store.driver_connections
        assert connections is not None, "the claim functions exist on PostgreSQL only"
        return connections

    def _claim_in_database(
        self, cached: _Registered, owner: str, namespace: str, job: str, lease: timedelta
    ) -> LotClaim | None:
        """The guarded search and ``_start`` of ``_claim_once`` in one call (``FallBack`` where it
        does not apply); None if the search found nothing."""
        run_id = uuid.uuid4()
        reg = cached.registration
        try:
            found = claim_functions.claim_next_lot(
                self._driver_connections(),
                job_id=cached.job_id,
                stamp=cached.guard.stamp,
                version_id=cached.guard.version_id,
                output_id=reg.output_dataset_id,
                input_ids=reg.inputs,
                owner=owner,
                run_id=run_id,
                lease=lease,
            )
        except claim_functions.LostRace:
            raise _LostRace() from None
        if found is None:
            return None
        candidate = claims.Candidate(found.lot, claims.input_lots(reg, found.lot), found.attempt)
        return _lot_claim(cached, candidate, owner, namespace, job, run_id, found.lease_expires_at)

    def _may_find_work(self, namespace: str, job: str) -> bool:
        """Where writers serialize (SQLite), look for hints without the write lock first."""
        if not single_writer(self._store.engine):
            return True
        with self._store.read() as connection:
            found = self._job(connection, namespace, job)
            return not found.registration.held and frontier.has_hints(connection, found.registration.job_id)

    def _job(self, connection: Connection, namespace: str, job: str) -> _Registered:
        """The registered job, from one read; its inputs and dataset names are re-read only when its
        registration changed since this service last looked (workers claim the same jobs all day)."""
        row = data_status.registered_job(connection, namespace, validate_name("Job", job))
        if row is None:
            raise NotFound("Job", f"{namespace}:{job}")
        if row.registered is None:
            raise Conflict(f"Job {namespace}:{job} takes no part in lot coordination; register it first.")
        known = self._registered.get((namespace, job))
        if known is None or known.job_id != row.id or known.guard.stamp != row.updated_at:
            reg = registration(connection, row.id)
            assert reg is not None
            refs = datasets.dataset_refs(connection, [reg.output_dataset_id, *reg.inputs])
            names = {d: ref.name for d, ref in refs.items()}
        else:
            reg, names = known.registration, known.names
        known = _Registered(
            row.id,
            frontier.Guard(row.updated_at, row.current_version_id),
            replace(reg, held=bool(row.held)),
            names,
        )
        self._registered[(namespace, job)] = known
        return known

    def _claim_once(
        self,
        connection: Connection,
        owner: str,
        namespace: str,
        job: str,
        lot: str | None,
        lease: timedelta,
        *,
        searched: bool = False,
        skip: Container[str] = (),
    ) -> LotClaim | None:
        """``searched``: the guarded search with the cached registration already found nothing."""
        cached = self._registered.get((namespace, job)) if lot is None else None
        if cached is not None and not cached.registration.held and not searched:
            # The common case: the search itself checks that the cached registration is current.
            candidate = claims.next_candidate(
                connection, cached.registration, utcnow(), cached.guard, skip=skip
            )
            if candidate is not None:
                return self._start(connection, cached, candidate, owner, namespace, job, lease)
        found = self._job(connection, namespace, job)
        reg = found.registration
        if reg.held:
            if lot is not None:
                raise Conflict(f"Job {namespace}:{job} is on hold; release it first.")
            return None
        if lot is not None:
            candidate = claims.named_candidate(connection, reg, lot)
        elif cached is not None and found.guard == cached.guard and not cached.registration.held:
            return None  # the guarded search above was current and found nothing
        else:
            candidate = claims.next_candidate(connection, reg, utcnow(), skip=skip)
        if candidate is None:
            return None
        return self._start(connection, found, candidate, owner, namespace, job, lease)

    def _start(
        self,
        connection: Connection,
        found: _Registered,
        candidate: claims.Candidate,
        owner: str,
        namespace: str,
        job: str,
        lease: timedelta,
    ) -> LotClaim:
        """Create and start the claim's run, then take the lot (``_LostRace`` if another worker won)."""
        reg = found.registration
        # The run starts now, after the check: the take succeeds only if the lot is still as the check
        # saw it, so an earlier attempt had ended (and committed) before now; run intervals never overlap.
        now = utcnow()
        run_id = uuid.uuid4()
        create_run(
            connection,
            run_id=run_id,
            job_id=found.job_id,
            job_version_id=found.guard.version_id,
            lot=candidate.lot,
            inputs=candidate.inputs,
            outputs=[(reg.output_dataset_id, candidate.lot)],
            started_at=now,
        )
        expires = now + lease
        if not claims.take(
            connection, reg, candidate, owner=owner, run_id=run_id, lease_expires_at=expires, now=now
        ):
            raise _LostRace(candidate.lot)
        return _lot_claim(found, candidate, owner, namespace, job, run_id, expires)

    def heartbeat(self, claim: LotClaim, lease: timedelta = DEFAULT_LEASE) -> LotClaim:
        """Extend a live claim's lease; a claim that is no longer live is a Conflict (stop working)."""
        if lease <= timedelta(0):
            raise InvalidInput(f"lease must be positive, got {lease}.")
        now = utcnow()
        with self._store.write() as connection:
            claims.heartbeat(connection, _fence(claim), now + lease, now)
        return LotClaim(**{**claim.__dict__, "lease_expires_at": now + lease})

    def complete(
        self,
        claim: LotClaim,
        at: datetime | None = None,
        *,
        manifest: ManifestDraft | None = None,
        facets: dict[str, Any] | None = None,
        output_facets: dict[str, Any] | None = None,
    ) -> uuid.UUID | None:
        """Publish the lot: OUTPUT READY, INPUTs DONE, the run COMPLETED with its version current, the
        manifest (complete, or empty when it lists nothing) and the lot's READY event — one
        transaction. Returns the manifest's id; its JSON copy is written after the commit.
        ``facets`` are the run's; ``output_facets`` the new version's (``outputStatistics``…)."""
        return self._finish(
            claim, success=True, at=at, manifest=manifest, facets=facets, output_facets=output_facets
        )

    def fail(
        self,
        claim: LotClaim,
        at: datetime | None = None,
        *,
        manifest: ManifestDraft | None = None,
        error: BaseException | str | None = None,
        facets: dict[str, Any] | None = None,
    ) -> uuid.UUID | None:
        """OUTPUT ERROR, INPUTs ERROR (released) and the run FAILED with ``error`` recorded on it (the
        OpenLineage ``errorMessage`` facet): the lot may be retried. What the attempt wrote is recorded
        as a partial manifest in the same transaction, then its objects are removed (manifest removed,
        arc missing). Returns the manifest's id."""
        facets = dict(facets or {})
        if error is not None:
            facets["errorMessage"] = error_message_facet(error)
        return self._finish(claim, success=False, at=at, manifest=manifest, facets=facets)

    def _finish(
        self,
        claim: LotClaim,
        *,
        success: bool,
        at: datetime | None,
        manifest: ManifestDraft | None = None,
        facets: dict[str, Any] | None = None,
        output_facets: dict[str, Any] | None = None,
    ) -> uuid.UUID | None:
        _common.check_aware("at", at)
        fence = _fence(claim)
        version_id = output_version_id(claim.namespace, claim.dataset, claim.lot, claim.run_id)
        if self._in_database and manifest is None and not facets and not output_facets:
            try:
                claim_functions.finish_claim(
                    self._driver_connections(),
                    job_id=claim.job_id,
                    run_id=claim.run_id,
                    owner=claim.owner,
                    attempt=claim.attempt,
                    success=success,
                    at=at,
                    output_id=claim.dataset_id,
                    lot=claim.lot,
                    version_id=version_id,
                )
                return None
            except claim_functions.NotLive:
                raise claims.not_live(fence, "complete" if success else "fail") from None
            except claim_functions.FallBack:
                pass  # nothing was written: the Python path below handles every case
        now = utcnow()
        manifest_id = None if manifest is None else uuid.uuid4()
        with self._store.write() as connection:
            claims.finish(connection, fence, success=success, now=now)
            apply_transition(
                connection, claim.run_id, RunAction.COMPLETE if success else RunAction.FAIL, at or now
            )
            if not success:
                _fail_children(connection, claim.run_id, now)
            elif output_facets:
                versions.merge_facets(connection, version_id, output_facets)
            if facets:
                run_row = runs.lock_run(connection, claim.run_id)
                if run_row is not None:  # apply_transition above found it
                    runs.merge_run_facets(connection, run_row, facets, now)
            claims.announce(connection, fence, success=success, now=now)
            if manifest is not None and manifest_id is not None:
                manifest_rows.insert_manifest(
                    connection,
                    manifest_id=manifest_id,
                    dataset_id=claim.dataset_id,
                    lot=claim.lot,
                    run_id=claim.run_id,
                    version_id=version_id,
                    attempt=claim.attempt,
                    state=manifest.state_for(success=success),
                    draft=manifest,
                    now=now,
                )
            if success:
                entry = (claim.dataset_id, claim.lot, manifest_id, version_id, claim.run_id)
                lot_events.append(connection, LotEventKind.READY, [entry], now)
        if manifest_id is not None:
            self._manifests.publish_copy(manifest_id)
            if not success:
                self._manifests.remove_partial(manifest_id)
        return manifest_id

    def reap(self, limit: int = 100) -> int:
        """Fail claims whose lease expired (ERROR, run FAILED) so their lots become eligible again."""
        now = utcnow()
        with self._store.write() as connection:
            failed = claims.reap(connection, now, limit)
            for run_id in failed:
                apply_transition(connection, run_id, RunAction.FAIL, now)
                _fail_children(connection, run_id, now)
        return len(failed)

    # -- the operator's side -------------------------------------------------------------------
    def invalidate(self, namespace: str, dataset: str, lot: str) -> list[DatasetRef]:
        """Reopen a READY lot and, transitively, every lot made from it (SPEC §4 "Invalidation")."""
        stored_lot = _common.lot_key(lot)
        now = utcnow()
        with self._store.write() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            done = operator.invalidate(connection, dataset_id, stored_lot, now, f"{namespace}:{dataset}")
            for run_id in done.revoked_runs:
                apply_transition(connection, run_id, RunAction.FAIL, now)
            refs = datasets.dataset_refs(connection, [d for d, _ in done.reopened])
            reopened = [(d, lot_, None, None, None) for d, lot_ in done.reopened]
            lot_events.append(connection, LotEventKind.REOPENED, reopened, now)
        found = [DatasetRef(refs[d].namespace, refs[d].name, lot_) for d, lot_ in done.reopened]
        for ref in found:
            if ref.lot:
                self._manifests.withdraw_copies(ref.namespace, ref.name, ref.lot)
        return found

    def hold_lot(self, namespace: str, dataset: str, lot: str) -> bool:
        """Pause (dataset, lot): it is neither produced nor read until released. False if already held."""
        stored_lot = _common.lot_key(lot)
        with self._store.write() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            producer = data_status.producer_of(connection, dataset_id)
            if producer is None:
                raise Conflict(
                    f"Dataset {namespace}:{dataset} has no producing job registered; nothing to hold."
                )
            return operator.hold_lot(connection, dataset_id, stored_lot, producer, utcnow())

    def release_lot(self, namespace: str, dataset: str, lot: str) -> Status | None:
        """End a hold; returns the status the lot is back in (None: it had never been produced)."""
        stored_lot = _common.lot_key(lot)
        now = utcnow()
        with self._store.write() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            restored = operator.release_lot(connection, dataset_id, stored_lot, now)
            if restored is Status.READY:  # readable again: its consumers may go on
                entry = (dataset_id, stored_lot, None, None, None)
                lot_events.append(connection, LotEventKind.READY, [entry], now)
            return restored

    def hold_job(self, namespace: str, job: str) -> bool:
        """Stop new claims of a whole job (running claims finish). False if it was already held."""
        with self._store.write() as connection:
            job_row, _ = _registered(connection, namespace, job)
            return data_status.set_job_held(connection, job_row.id, True, utcnow())

    def release_job(self, namespace: str, job: str) -> None:
        with self._store.write() as connection:
            job_row, _ = _registered(connection, namespace, job)
            if not data_status.set_job_held(connection, job_row.id, False, utcnow()):
                raise Conflict(f"Job {namespace}:{job} is not on hold.")

    def clean(self, namespace: str, job: str, lot: str) -> None:
        """Record that the failed attempt's partial data was removed: arc partial -> missing."""
        stored_lot = _common.lot_key(lot)
        with self._store.write() as connection:
            _, reg = _registered(connection, namespace, job)
            operator.clean(connection, reg.output_dataset_id, stored_lot, utcnow())

    # -- looking -------------------------------------------------------------------------------
    def arc_state(self, namespace: str, job: str, lot: str) -> ArcState:
        stored_lot = _common.lot_key(lot)
        with self._store.read() as connection:
            job_row, reg = _registered(connection, namespace, job)
            row = data_status.lot_row(connection, reg.output_dataset_id, stored_lot, job_row.id)
            return operator.arc_of(row)

    def counts(self, namespace: str, job: str) -> dict[Status, int]:
        """How many of the job's output lots are in each status: progress in one small read."""
        with self._store.read() as connection:
            found = self._job(connection, namespace, job)
            return {Status(s): n for s, n in data_status.output_counts(connection, found.job_id).items()}

    def status(
        self,
        namespace: str | None = None,
        *,
        job: str | None = None,
        dataset: str | None = None,
        role: Role | None = Role.OUTPUT,
    ) -> list[LotStatus]:
        """Every matching row of the data-status table (by default OUTPUT rows: one per produced lot)."""
        with self._store.read() as connection:
            where = _status_filter(connection, namespace, job, dataset, role, (), None, None)
            return [_lot_status(r) for r in data_status.status_rows(connection, where)]

    def status_page(
        self,
        namespace: str,
        *,
        job: str | None = None,
        dataset: str | None = None,
        role: Role | None = Role.OUTPUT,
        statuses: Sequence[Status] = (),
        lot_from: str | None = None,
        lot_to: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> Page[LotStatus]:
        """One page of a job's or dataset's lots, filtered by status and an inclusive lot-id range
        (lot ids sort in time order as strings)."""
        _common.check_page(limit, offset)
        with self._store.read() as connection:
            where = _status_filter(
                connection, namespace, job, dataset, role, tuple(statuses), lot_from, lot_to
            )
            rows = data_status.status_rows(connection, where, limit, offset)
            return Page([_lot_status(r) for r in rows], data_status.count_status_rows(connection, where))


def _status_filter(
    connection: Connection,
    namespace: str | None,
    job: str | None,
    dataset: str | None,
    role: Role | None,
    statuses: tuple[Status, ...],
    lot_from: str | None,
    lot_to: str | None,
) -> data_status.StatusFilter:
    if namespace is None and (job is not None or dataset is not None):
        raise InvalidInput("A job or dataset filter needs its namespace.")
    for bound in (lot_from, lot_to):
        if bound is not None:
            _common.lot_key(bound)
    namespace_id = job_id = dataset_id = None
    if namespace is not None:
        namespace_id = _common.require_namespace(connection, namespace)
        if job is not None:
            job_id = _registered(connection, namespace, job)[0].id
        if dataset is not None:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
    return data_status.StatusFilter(namespace_id, job_id, dataset_id, role, statuses, lot_from, lot_to)


def _lot_status(r: Row[Any]) -> LotStatus:
    row_role, status = Role(r.role), Status(r.status)
    return LotStatus(
        namespace=r.namespace,
        dataset=r.dataset,
        lot=r.lot,
        job=r.job,
        role=row_role,
        status=status,
        held_status=Status(r.held_status) if r.held_status else None,
        attempt=r.attempt,
        owner=r.owner,
        lease_expires_at=r.lease_expires_at,
        run_id=r.run_id,
        arc=operator.arc_of(r) if row_role is Role.OUTPUT else None,
        lock=lock_of(row_role, status),
    )


def _registered(connection: Connection, namespace: str, job: str) -> tuple[jobs.StoredJob, Registration]:
    job_row = jobs.job_row(connection, namespace, validate_name("Job", job))
    if job_row is None:
        raise NotFound("Job", f"{namespace}:{job}")
    reg = registration(connection, job_row.id)
    if reg is None:
        raise Conflict(f"Job {namespace}:{job} takes no part in lot coordination; register it first.")
    return job_row, reg


def _lot_claim(
    found: _Registered,
    candidate: claims.Candidate,
    owner: str,
    namespace: str,
    job: str,
    run_id: uuid.UUID,
    lease_expires_at: datetime,
) -> LotClaim:
    reg, names = found.registration, found.names
    return LotClaim(
        namespace=namespace,
        job=job,
        dataset=names[reg.output_dataset_id],
        lot=candidate.lot,
        input_lots=tuple((names[d], input_lot) for d, input_lot in candidate.inputs),
        owner=owner,
        job_id=found.job_id,
        dataset_id=reg.output_dataset_id,
        attempt=candidate.attempt,
        run_id=run_id,
        lease_expires_at=lease_expires_at,
    )


def _fence(claim: LotClaim) -> claims.Fence:
    return claims.Fence(claim.job_id, claim.dataset_id, claim.lot, claim.owner, claim.attempt, claim.run_id)


def _fail_children(connection: Connection, run_id: uuid.UUID, now: datetime) -> None:
    """A lot's run that fails takes its parts still running with it (their worker is gone or gave up)."""
    for child in runs.running_children(connection, run_id):
        apply_transition(connection, child, RunAction.FAIL, now)


def error_message_facet(error: BaseException | str) -> dict[str, Any]:
    """OpenLineage's ``errorMessage`` run facet: the message, and the stack of an exception."""
    facet: dict[str, Any] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json",
        "programmingLanguage": "python",
    }
    if isinstance(error, BaseException):
        facet["message"] = f"{type(error).__name__}: {error}"
        facet["stackTrace"] = "".join(traceback.format_exception(error))
    else:
        facet["message"] = str(error)
    return facet
