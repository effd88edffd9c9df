"""Use cases of lot coordination (SPEC §4, §5): claim -> run -> complete/fail, and the operator's moves.

Each use case is one ``Store.write()`` transaction, so a lot's status and its run's version
commit together: a lot is READY exactly when its run COMPLETED and its version became current.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import Connection

from lotline.coordination import claims, operator
from lotline.coordination.registry import LotJob, check_storage, find_lot_job, not_coordinated, register
from lotline.domain import failures
from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.coordination import (
    DEFAULT_MAX_ATTEMPTS,
    ArcState,
    LotClaim,
    LotMapping,
    LotStatus,
    Role,
    Status,
    check_max_attempts,
    check_owner,
    lock_of,
)
from lotline.domain.errors import Conflict, DatabaseError, InvalidInput, LotlineError, NotFound
from lotline.domain.failures import Failure
from lotline.domain.manifests import LotEventKind, Manifest, ManifestDraft
from lotline.domain.model import DatasetRef, Job, Page
from lotline.domain.names import validate_name
from lotline.domain.runs import RunAction, RunState
from lotline.domain.versions import job_version_id, output_version_id
from lotline.services import _common, claiming
from lotline.services.claiming.jobs import JobCache
from lotline.services.claiming.path import ClaimEnd, ClaimRequest, LostRace, OutputEnd
from lotline.services.claiming.python_path import fail_children, fence_of
from lotline.services.facets import error_message
from lotline.services.manifests import ManifestService
from lotline.services.recording import apply_transition
from lotline.store.engine import Store
from lotline.store.queries import datasets, frontier, jobs, lot_events, lot_lineage, registry, reporting, runs
from lotline.store.queries import manifests as manifest_rows
from lotline.store.queries.claims import StatusRow
from lotline.store.queries.events import JournalEntry

log = logging.getLogger(__name__)
DEFAULT_LEASE = timedelta(seconds=30)
#: Lots of a backfill reopened per transaction (with their downstream lots).
INVALIDATE_BATCH = 2000
#: A claim that loses a race for a lot tries the next one; this bounds the retries of one claim.
MAX_RACES = 16


class LotService:
    def __init__(
        self,
        store: Store,
        manifests: ManifestService,
        *,
        clock: Clock = SYSTEM_CLOCK,
        database_functions: bool | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        """``clock``: where every use case takes the time from (tests pass one they advance).
        ``database_functions``: whether a worker's common path runs as one call each of the
        PostgreSQL claim functions (docs/coordination.md); by default wherever the database has them
        and the clock is the system's. Either way the claim path is chosen here, once.
        ``max_attempts``: failures in a row (same inputs, same job version) after which a lot is given
        up on until an input or the job version changes or an operator retries it (``retry``)."""
        self._store = store
        self._manifests = manifests
        self._clock = clock
        self._jobs = JobCache()
        self._claims = claiming.choose(
            store,
            clock,
            self._jobs,
            max_attempts=check_max_attempts(max_attempts, "max_attempts"),
            database_functions=database_functions,
        )

    # -- registering jobs ---------------------------------------------------------------------
    def register_job(
        self,
        namespace: str,
        job: str,
        *,
        output: str | Sequence[str],
        inputs: Sequence[str] = (),
        lot_mapping: str | None = None,
        location: str | None = None,
        code_digest: str | None = None,
    ) -> Job:
        """Declare a job that produces ``output`` lot by lot from ``inputs`` (the job's catalog entry too).

        ``output`` may list several datasets: the job produces each of its lots for all of them at
        once (the first carries the claim; all are published together). A dataset has exactly one
        producer: registering a second one is a Conflict and changes nothing. ``lot_mapping`` (e.g.
        ``PT5M->PT1H``) says how input lots roll up into output lots. ``code_digest`` (the runner's
        digest of the transform) enters the job version id.
        """
        validate_name("Job", job)
        outputs = [output] if isinstance(output, str) else list(output)
        if not outputs:
            raise InvalidInput(f"Job {namespace}:{job} needs an output.")
        mapping = LotMapping.parse(lot_mapping) if lot_mapping is not None else None
        with self._store.write() as connection:
            namespace_id = _common.require_namespace(connection, namespace)
            output_ids = [_common.require_dataset(connection, namespace, d) for d in outputs]
            input_ids = [_common.require_dataset(connection, namespace, d) for d in inputs]
            now = self._clock.now()
            stored = jobs.upsert_job(connection, namespace_id, job, type_="BATCH", description=None, now=now)
            job_id = stored.id
            version = job_version_id(
                namespace,
                job,
                location,
                [f"{namespace}:{d}" for d in inputs],
                [f"{namespace}:{d}" for d in outputs],
                code_digest,
            )
            same = stored.current_version_id == version  # a new version is recorded after the others
            jobs.set_current_version(
                connection,
                job_id,
                version,
                location=location,
                inputs=input_ids,
                outputs=output_ids,
                now=now if same else jobs.version_stamp(connection, job_id, now),
            )
            describe = {i: f"{namespace}:{d}" for i, d in zip(output_ids, outputs, strict=True)}
            describe.update({i: f"{namespace}:{d}" for i, d in zip(input_ids, inputs, strict=True)})
            register(
                connection,
                job_id,
                output_ids,
                input_ids,
                mapping,
                now,
                describe=describe,
                names=[(namespace, d) for d in outputs],
                keep_given_up=stored.current_version_id == version,
            )
            found = jobs.get_job(connection, namespace, job)
        if found is None:  # written above, in this transaction
            raise NotFound("Job", f"{namespace}:{job}")
        return found

    def check_output(self, namespace: str, dataset: str) -> None:
        """Refuse, before anything is declared, a dataset that ``register_job`` would refuse as an
        output for its storage folder (a reserved or too long segment, a folder overlapping another
        produced dataset's); registering checks again, in its transaction."""
        with self._store.read() as connection:
            known = datasets.dataset_id(connection, namespace, dataset)
            if known is None or registry.producer_of(connection, known) is None:
                check_storage(connection, namespace, dataset)

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
        request = ClaimRequest(owner, namespace, job, wanted, lease, skip)
        for _ in range(MAX_RACES):
            try:
                return self._claims.claim(request)
            except LostRace:
                if wanted is not None:
                    raise Conflict(f"Lot {wanted} was just claimed by another worker.") from None
        return None

    def heartbeat(self, claim: LotClaim, lease: timedelta = DEFAULT_LEASE) -> LotClaim:
        """Extend a live claim's lease; a claim that is no longer live is a Conflict (stop working)."""
        if lease <= timedelta(0):
            raise InvalidInput(f"lease must be positive, got {lease}.")
        now = self._clock.now()
        with self._store.write() as connection:
            claims.heartbeat(connection, fence_of(claim), now + lease, now)
        return LotClaim(**{**claim.__dict__, "lease_expires_at": now + lease})

    def read_inputs(self, claim: LotClaim) -> ClaimInputs:
        """What the claimed lot reads, in one read transaction: its input lots' readable manifests
        and the runs that wrote the versions its run is pinned to (its START's ``jobDependencies``)."""
        wanted: dict[str, list[str]] = {}
        for dataset, lot in claim.input_lots:
            wanted.setdefault(dataset, []).append(lot)
        found: dict[str, dict[str, Manifest]] = {}
        with self._store.read() as connection:
            for dataset, lots in wanted.items():
                dataset_id = datasets.dataset_id(connection, claim.namespace, dataset)
                found[dataset] = (
                    {} if dataset_id is None else manifest_rows.readable(connection, dataset_id, lots)
                )
            upstream = lot_lineage.producers_of_inputs(connection, claim.run_id)
        return ClaimInputs(found, tuple(upstream))

    def complete(
        self,
        claim: LotClaim,
        at: datetime | None = None,
        *,
        outputs: Mapping[str, OutputWritten] | None = None,
        facets: dict[str, Any] | None = None,
        journal: Sequence[JournalEntry] = (),
    ) -> dict[str, uuid.UUID]:
        """Publish the lot: OUTPUT READY, INPUTs DONE, the run COMPLETED with its version current, the
        manifest (complete, or empty when it lists nothing), ``journal`` (the run's OpenLineage
        events, ``EmissionService.completion``) and the lot's READY event — one transaction.
        ``outputs``: what the attempt wrote, by output dataset name (``OutputWritten``); every output
        of the claim alike — the claim's own dataset is one of them — and an output not listed
        publishes no manifest and no version facets. With several outputs, all are published in the
        same transaction. ``facets`` are the run's. Returns the id of each manifest recorded, by
        dataset name; their JSON copies are written after the commit."""
        return self._finish(
            claim, success=True, at=at, outputs=outputs, facets=facets, journal=tuple(journal)
        )

    def fail(
        self,
        claim: LotClaim,
        at: datetime | None = None,
        *,
        outputs: Mapping[str, OutputWritten] | None = None,
        error: BaseException | str | Failure | None = None,
        facets: dict[str, Any] | None = None,
    ) -> dict[str, uuid.UUID]:
        """OUTPUT ERROR, INPUTs ERROR (released) and the run FAILED with ``error`` recorded on it: its
        one-line reason (``failures.failure_of``) in ``runs.error`` and the OpenLineage
        ``errorMessage`` facet, whose ``stackTrace`` keeps the rest. The lot may be retried. What the
        attempt wrote to each output (``outputs``, by dataset name, as for ``complete``) is recorded
        as a partial manifest in the same transaction, then its objects are removed (manifest
        removed, arc missing). Returns the id of each manifest recorded, by dataset name."""
        facets = dict(facets or {})
        failure = None if error is None else failures.failure_of(error)
        if failure is not None:
            facets["errorMessage"] = error_message(failure)
        return self._finish(claim, success=False, at=at, outputs=outputs, facets=facets, failure=failure)

    def _finish(
        self,
        claim: LotClaim,
        *,
        success: bool,
        at: datetime | None,
        outputs: Mapping[str, OutputWritten] | None = None,
        facets: dict[str, Any] | None = None,
        failure: Failure | None = None,
        journal: tuple[JournalEntry, ...] = (),
    ) -> dict[str, uuid.UUID]:
        _common.check_aware("at", at)
        ends = _output_ends(claim, outputs or {})
        reason, kind = (None, None) if failure is None else (failure.reason, failure.kind)
        end = ClaimEnd(success, at, ends, facets, reason, journal, kind)
        manifest_ids = self._claims.finish(claim, end)
        for manifest_id in manifest_ids.values():
            self._tidy(manifest_id, success=success)
        names = {dataset_id: name for name, dataset_id in claim.output_datasets}
        return {names[dataset_id]: manifest_id for dataset_id, manifest_id in manifest_ids.items()}

    def _tidy(self, manifest_id: uuid.UUID, *, success: bool) -> None:
        """After the claim's end committed: the manifest's copy, and a failed attempt's objects
        removed. Both are repeated by ``lotline cleanup``, so a failure here (a read-only warehouse,
        the database gone meanwhile) is logged and never reported as the end's own: the lot's
        status and its run are recorded."""
        try:
            self._manifests.publish_copy(manifest_id)
            if not success:
                self._manifests.remove_partial(manifest_id)
        except Exception as error:
            what = "copy" if success else "copy or its failed attempt's objects"
            log.warning(
                "manifest %s is recorded, but its %s could not be written or removed (%s: %s); "
                "lotline cleanup finishes it",
                manifest_id,
                what,
                type(error).__name__,
                error,
            )

    def reap(self, limit: int = 100) -> int:
        """Release claims whose lease expired (OUTPUT ERROR, inputs released, a FAILED lot event) so
        their lots become eligible again, and fail their runs; returns how many were reaped.

        A run that is no longer RUNNING (ended from outside after its lease ran out) is left as it
        is; the lot is released all the same. One lot's run that cannot be ended is logged and left:
        it never keeps the other lots, or the worker that reaps, from going on."""
        now = self._clock.now()

        def release(connection: Connection) -> list[StatusRow]:
            reaped = claims.reap(connection, now, limit)  # one row per output of each claim
            ended = {row.run_id: row for row in reaped if row.run_id is not None}
            for run_id, row in ended.items():
                reason = failures.lease_expired(row.owner, row.updated_at)
                _end_revoked_run(connection, run_id, now, reason)
            for row in reaped:  # appends come last in the transaction (positions in commit order)
                if row.run_id is not None:
                    entry = (row.dataset_id, row.lot, None, None, row.run_id)
                    reason = failures.lease_expired(row.owner, row.updated_at)
                    lot_events.append(
                        connection, LotEventKind.FAILED, [entry], now, attempt=row.attempt, reason=reason
                    )
            return reaped

        reaped = self._store.transact(release)
        return len({(row.job_id, row.run_id, row.lot) for row in reaped})

    # -- the operator's side -------------------------------------------------------------------
    def invalidate(self, namespace: str, dataset: str, lot: str) -> list[DatasetRef]:
        """Reopen a READY lot and, transitively, every lot made from it (SPEC §4 "Invalidation")."""
        found = self._invalidate(namespace, dataset, lot, None)
        return [] if found is None else found

    def invalidate_many(
        self, namespace: str, dataset: str, lots: Sequence[str], *, dry_run: bool = False
    ) -> list[DatasetRef]:
        """``invalidate`` of many READY lots of one dataset (a backfill): the same changes, made
        set-wise (``operator.invalidate_many``), ``INVALIDATE_BATCH`` lots per transaction. The
        lots reopened, downstream ones included, each once. ``dry_run``: the same walk in one
        transaction rolled back — exactly what the backfill would reopen, nothing changed."""
        found: list[DatasetRef] = []
        stored = [_common.lot_key(lot) for lot in lots]
        batches = [
            stored[start : start + INVALIDATE_BATCH] for start in range(0, len(stored), INVALIDATE_BATCH)
        ]
        if dry_run:
            with self._store.rehearsal() as connection:
                for batch in batches:
                    found += self._invalidate_batch(
                        connection, namespace=namespace, dataset=dataset, batch=batch
                    )
            return found
        for batch in batches:
            made = self._store.transact(
                partial(self._invalidate_batch, namespace=namespace, dataset=dataset, batch=batch)
            )
            self._manifests.withdraw_copies_many([ref for ref in made if ref.lot])
            found += made
        return found

    def _invalidate_batch(
        self, connection: Connection, *, namespace: str, dataset: str, batch: Sequence[str]
    ) -> list[DatasetRef]:
        now = self._clock.now()
        dataset_id = _common.require_dataset(connection, namespace, dataset)
        done = operator.invalidate_many(connection, dataset_id, batch, now, f"{namespace}:{dataset}")
        for run_id in done.revoked_runs:
            reason = f"revoked: an input lot of {namespace}:{dataset} was invalidated (backfill)"
            _end_revoked_run(connection, run_id, now, reason)
        refs = datasets.dataset_refs(connection, list({d for d, _ in done.reopened}))
        reopened = [(d, lot_, None, None, None) for d, lot_ in done.reopened]
        lot_events.append(connection, LotEventKind.REOPENED, reopened, now)
        return [DatasetRef(refs[d].namespace, refs[d].name, lot_) for d, lot_ in done.reopened]

    def invalidate_if_comment(self, namespace: str, dataset: str, lot: str, comment: str | None) -> bool:
        """``invalidate``, only if the lot's readable manifest still has ``comment`` (ingest's landing
        digest) — checked and done in one transaction. False, changing nothing, when it has not: a
        concurrent ingest registered the lot's new files first (or holds the lot to do so), and
        reopening its version would make a second one of the same change."""
        return self._invalidate(namespace, dataset, lot, (comment,)) is not None

    def _invalidate(
        self, namespace: str, dataset: str, lot: str, expected: tuple[str | None] | None
    ) -> list[DatasetRef] | None:
        stored_lot = _common.lot_key(lot)
        now = self._clock.now()

        def reopen(connection: Connection) -> list[DatasetRef] | None:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            if expected is not None:
                datasets.lock_dataset(connection, dataset_id)  # serializes it with the lot's completion
                current = manifest_rows.readable(connection, dataset_id, [stored_lot]).get(stored_lot)
                if current is None or current.comment != expected[0]:
                    return None
            done = operator.invalidate(connection, dataset_id, stored_lot, now, f"{namespace}:{dataset}")
            for run_id in done.revoked_runs:
                _end_revoked_run(
                    connection, run_id, now, f"revoked: input {namespace}:{dataset} lot {lot} was invalidated"
                )
            refs = datasets.dataset_refs(connection, [d for d, _ in done.reopened])
            reopened = [(d, lot_, None, None, None) for d, lot_ in done.reopened]
            lot_events.append(connection, LotEventKind.REOPENED, reopened, now)
            return [DatasetRef(refs[d].namespace, refs[d].name, lot_) for d, lot_ in done.reopened]

        found = self._store.transact(reopen)
        if found is None:
            return None
        for ref in found:
            if ref.lot:
                self._manifests.withdraw_copies(ref.namespace, ref.name, ref.lot)
        return found

    def hold_lot(self, namespace: str, dataset: str, lot: str) -> bool:
        """Pause (dataset, lot): it is neither produced nor read until released. False if already held.
        The same lot of its producer's other outputs is held with it (they are produced together)."""
        stored_lot = _common.lot_key(lot)
        with self._store.write() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            producer = registry.producer_of(connection, dataset_id)
            if producer is None:
                raise Conflict(
                    f"Dataset {namespace}:{dataset} has no producing job registered; nothing to hold."
                )
            now = self._clock.now()
            held = {
                d: operator.hold_lot(connection, d, stored_lot, producer, now)
                for d in sorted(registry.job_outputs(connection, producer) or [dataset_id])
            }
            return held.get(dataset_id, False)

    def release_lot(self, namespace: str, dataset: str, lot: str) -> Status | None:
        """End a hold; returns the status the lot is back in (None: it had never been produced). The
        same lot of the producer's other outputs is released with it."""
        stored_lot = _common.lot_key(lot)
        now = self._clock.now()
        with self._store.write() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            producer = registry.producer_of(connection, dataset_id)
            siblings = [] if producer is None else registry.job_outputs(connection, producer)
            restored = {dataset_id: operator.release_lot(connection, dataset_id, stored_lot, now)}
            for sibling in sorted(set(siblings) - {dataset_id}):
                if operator.is_held(connection, sibling, stored_lot):
                    restored[sibling] = operator.release_lot(connection, sibling, stored_lot, now)
            ready = [(d, stored_lot, None, None, None) for d, s in restored.items() if s is Status.READY]
            if ready:  # readable again: its consumers may go on
                lot_events.append(connection, LotEventKind.READY, ready, now)
            return restored[dataset_id]

    def hold_job(self, namespace: str, job: str) -> bool:
        """Stop new claims of a whole job (running claims finish). False if it was already held."""
        with self._store.write() as connection:
            lot_job = lot_job_named(connection, namespace, job)
            return registry.set_job_held(connection, lot_job.job_id, True, self._clock.now())

    def release_job(self, namespace: str, job: str) -> None:
        with self._store.write() as connection:
            lot_job = lot_job_named(connection, namespace, job)
            if not registry.set_job_held(connection, lot_job.job_id, False, self._clock.now()):
                raise Conflict(f"Job {namespace}:{job} is not on hold.")

    def held_jobs(self, namespace: str) -> list[str]:
        """The namespace's held jobs by name (a hold is no lot event: live pages ask for these)."""
        with self._store.read() as connection:
            return registry.held_job_names(connection, namespace)

    def retry_now(self, namespace: str, job: str, lots: Sequence[str] | None = None) -> int:
        """Take the job's failed lots (``lots``, or all) off their back-off: the next claim may take
        them at once (``lotline run`` asks this of every lot it runs); lots given up on stay so.
        Returns how many were waiting."""
        wanted = None if lots is None else [_common.lot_key(lot) for lot in lots]
        with self._store.write() as connection:
            lot_job = lot_job_named(connection, namespace, job)
            return len(frontier.make_due(connection, lot_job.job_id, wanted, self._clock.now()))

    def retry(self, namespace: str, job: str, lots: Sequence[str] | None = None) -> int:
        """An operator's retry: the job's failed lots (``lots``, or all), given up on or waiting for
        their back-off, are due at once with their count of failures back to 0. Returns how many.
        A named lot that is not failed (nothing to retry) is a Conflict, and nothing changes."""
        wanted = None if lots is None else [_common.lot_key(lot) for lot in lots]
        with self._store.write() as connection:
            lot_job = lot_job_named(connection, namespace, job)
            made = frontier.make_due(connection, lot_job.job_id, wanted, self._clock.now(), afresh=True)
            missing = sorted(set(wanted or ()) - set(made))
            if missing:  # raised inside the transaction: it is rolled back
                raise Conflict(
                    f"Job {namespace}:{job} has no failed lot {', '.join(missing)} waiting to be retried; "
                    "nothing was retried."
                )
            return len(made)

    def given_up(self, namespace: str, job: str) -> dict[str, int]:
        """The job's lots given up on, each with the failed attempts in a row it gave up after."""
        with self._store.read() as connection:
            lot_job = lot_job_named(connection, namespace, job)
            return frontier.given_up(connection, lot_job.job_id)

    def clean(self, namespace: str, job: str, lot: str) -> None:
        """Record that the failed attempt's partial data was removed: arc partial -> missing."""
        stored_lot = _common.lot_key(lot)
        with self._store.write() as connection:
            lot_job = lot_job_named(connection, namespace, job)
            operator.clean(connection, lot_job.all_outputs, stored_lot, self._clock.now())

    # -- looking -------------------------------------------------------------------------------
    def arc_state(self, namespace: str, job: str, lot: str) -> ArcState:
        stored_lot = _common.lot_key(lot)
        with self._store.read() as connection:
            lot_job = lot_job_named(connection, namespace, job)
            row = reporting.lot_row(connection, lot_job.output_dataset_id, stored_lot, lot_job.job_id)
            return operator.arc_of(row)

    def counts(self, namespace: str, job: str) -> dict[Status, int]:
        """How many of the job's output lots are in each status: progress in one small read."""
        with self._store.read() as connection:
            found = self._jobs.load(connection, namespace, job)
            return {Status(s): n for s, n in reporting.output_counts(connection, found.job_id).items()}

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
            return [_lot_status(r) for r in reporting.status_rows(connection, where)]

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
            rows = reporting.status_rows(connection, where, limit, offset)
            return Page([_lot_status(r) for r in rows], reporting.count_status_rows(connection, where))


@dataclass(frozen=True)
class ClaimInputs:
    """What a claimed lot reads (``LotService.read_inputs``)."""

    #: By input dataset, the readable manifest of each of its input lots that has one.
    manifests: dict[str, dict[str, Manifest]]
    #: (namespace, job, run) of the runs that wrote the input versions the run is pinned to.
    upstream: tuple[tuple[str, str, uuid.UUID], ...]


@dataclass(frozen=True)
class OutputWritten:
    """What an attempt hands over for one of its job's outputs (``LotService.complete`` and
    ``fail``, by dataset name): the manifest draft of what it wrote there, and the new version's
    facets. Every output is handed over alike, the claim's own dataset included (docs/pipelines.md
    "Several outputs")."""

    manifest: ManifestDraft | None = None
    facets: dict[str, Any] | None = None


def _output_ends(claim: LotClaim, outputs: Mapping[str, OutputWritten]) -> tuple[OutputEnd, ...]:
    """Every output's end, in the claim's order, each with its new version; a name that is not one
    of the claim's outputs is refused (nothing is written)."""
    names = dict(claim.output_datasets)
    unknown = sorted(set(outputs) - set(names))
    if unknown:
        raise InvalidInput(
            f"job {claim.job} has no output {', '.join(unknown)} (its outputs: {', '.join(names)})."
        )
    ends = []
    for name, dataset_id in names.items():
        written = outputs.get(name, OutputWritten())
        version_id = output_version_id(claim.namespace, name, claim.lot, claim.run_id)
        ends.append(OutputEnd(dataset_id, version_id, written.manifest, written.facets))
    return tuple(ends)


def _status_filter(
    connection: Connection,
    namespace: str | None,
    job: str | None,
    dataset: str | None,
    role: Role | None,
    statuses: tuple[Status, ...],
    lot_from: str | None,
    lot_to: str | None,
) -> reporting.StatusFilter:
    if namespace is None and (job is not None or dataset is not None):
        raise InvalidInput("A job or dataset filter needs its namespace.")
    for bound in (lot_from, lot_to):
        if bound is not None:
            _common.lot_key(bound)
    namespace_id = job_id = dataset_id = None
    if namespace is not None:
        namespace_id = _common.require_namespace(connection, namespace)
        if job is not None:
            job_id = lot_job_named(connection, namespace, job).job_id
        if dataset is not None:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
    return reporting.StatusFilter(namespace_id, job_id, dataset_id, role, statuses, lot_from, lot_to)


def _lot_status(named: reporting.NamedStatusRow) -> LotStatus:
    r = named.row
    row_role, status = Role(r.role), Status(r.status)
    return LotStatus(
        namespace=named.namespace,
        dataset=named.dataset,
        lot=r.lot,
        job=named.job,
        role=row_role,
        status=status,
        held_status=Status(r.held_status) if r.held_status else None,
        attempt=r.attempt,
        owner=r.owner,
        lease_expires_at=r.lease_expires_at,
        run_id=r.run_id,
        arc=operator.arc_of(r) if row_role is Role.OUTPUT else None,
        lock=lock_of(row_role, status),
        error=named.error if status is Status.ERROR else None,
        gave_up_after=named.gave_up_after if status is Status.ERROR and row_role is Role.OUTPUT else None,
    )


def _end_revoked_run(connection: Connection, run_id: uuid.UUID, now: datetime, reason: str) -> None:
    """Fail the run of a claim that was taken away (reaped, revoked), with ``reason`` as its error
    message, and its parts still running. A run found in any other state than RUNNING stays as it
    is; one that cannot be failed is logged (one line) and left, its savepoint undone."""
    try:
        with connection.begin_nested():
            run = runs.lock_run(connection, run_id)
            if run is None or run.state is not RunState.RUNNING:
                shown = "gone" if run is None else run.state.value
                log.info(
                    "run %s of a revoked claim is %s already; the lot is released without it", run_id, shown
                )
            else:
                apply_transition(connection, run_id, RunAction.FAIL, now, locked=run)
                runs.merge_run_facets(connection, run, {"errorMessage": error_message(reason)}, now)
                runs.set_error(connection, run_id, reason, now)
            fail_children(connection, run_id, now)
    except LotlineError as error:
        if isinstance(error, DatabaseError):
            raise  # not the run's doing: the whole reap is tried again
        log.warning(
            "run %s of a revoked claim could not be failed (%s); the lot is released", run_id, error.message
        )


def lot_job_named(connection: Connection, namespace: str, job: str) -> LotJob:
    """The job's lot job: NotFound, or a Conflict if the job takes no part in coordination."""
    job_row = _common.require_job(connection, namespace, validate_name("Job", job))
    lot_job = find_lot_job(connection, job_row.id)
    if lot_job is None:
        raise not_coordinated(namespace, job)
    return lot_job
