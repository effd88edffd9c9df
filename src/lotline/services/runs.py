"""Use cases for runs: creation, the state machine, and what each run read and wrote."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection

from lotline.coordination import claims
from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.errors import Conflict, InvalidInput, NotFound
from lotline.domain.model import DatasetRef, JsonObject, Page, Run, RunIoRole
from lotline.domain.runs import RunAction, RunState
from lotline.services import _common
from lotline.services.recording import apply_transition, record_run_io
from lotline.store.engine import Store
from lotline.store.queries import runs


class RunService:
    def __init__(self, store: Store, clock: Clock = SYSTEM_CLOCK) -> None:
        """``clock``: the time against which a claim's lease is judged live (lot coordination's)."""
        self._store = store
        self._clock = clock

    def create_run(
        self,
        namespace: str,
        job: str,
        *,
        run_id: uuid.UUID | None = None,
        parent_run_id: uuid.UUID | None = None,
        lot: str | None = None,
        nominal_start_time: datetime | None = None,
        nominal_end_time: datetime | None = None,
        args: JsonObject | None = None,
        facets: JsonObject | None = None,
    ) -> Run:
        """A NEW run of the job's current version; an id that already exists is a conflict."""
        _common.check_aware("nominalStartTime", nominal_start_time)
        _common.check_aware("nominalEndTime", nominal_end_time)
        stored_lot = _common.lot_key(lot)
        run_id = run_id or uuid.uuid4()
        with self._store.write() as connection:
            found_job = _common.require_job(connection, namespace, job)
            if runs.run_exists(connection, run_id):
                raise Conflict(f"Run {run_id} already exists.")
            if parent_run_id is not None:
                _common.require_run(connection, parent_run_id, lock=False)
            runs.insert_run(
                connection,
                run_id=run_id,
                job_id=found_job.id,
                job_version_id=found_job.current_version_id,
                parent_run_id=parent_run_id,
                lot=stored_lot,
                nominal_start_time=nominal_start_time,
                nominal_end_time=nominal_end_time,
                args=args or {},
                facets=facets or {},
                now=self._clock.now(),
            )
            return self._load(connection, run_id)

    def transition(self, run_id: uuid.UUID, action: RunAction, at: datetime | None = None) -> Run:
        """Apply ``action`` at time ``at`` (default: now). Repeats are no-ops; illegal moves conflict.

        Starting pins the inputs; ending versions every output the run declared (SPEC §3). A run
        that a lot claim owns (until it is released or reaped) is ended by its claim only: ending
        it here is a Conflict.
        """
        _common.check_aware("at", at)
        with self._store.write() as connection:
            if action is not RunAction.START:
                claims.refuse_ending_claimed_run(connection, run_id, self._clock.now())
            apply_transition(connection, run_id, action, at, refuse_earlier=True)
            return self._load(connection, run_id)

    def record_inputs(self, run_id: uuid.UUID, inputs: Sequence[DatasetRef]) -> Run:
        """Inputs reported while running are pinned now; before the start, at the start."""
        return self._record(run_id, inputs, outputs=False)

    def record_outputs(self, run_id: uuid.UUID, outputs: Sequence[DatasetRef]) -> Run:
        """Outputs get their versions when the run ends, resolved by its outcome."""
        return self._record(run_id, outputs, outputs=True)

    def _record(self, run_id: uuid.UUID, refs: Sequence[DatasetRef], *, outputs: bool) -> Run:
        with self._store.write() as connection:
            entries = _common.require_datasets(connection, refs)
            run = _common.require_run(connection, run_id)
            record_run_io(
                connection, run, RunIoRole.OUTPUT if outputs else RunIoRole.INPUT, entries, self._clock.now()
            )
            return self._load(connection, run_id)

    def link_parent(self, run_id: uuid.UUID, parent_run_id: uuid.UUID) -> Run:
        """Make ``parent_run_id`` the parent of ``run_id`` (e.g. from an OpenLineage parent facet)."""
        if run_id == parent_run_id:
            raise InvalidInput("A run cannot be its own parent.")
        with self._store.write() as connection:
            for needed in (run_id, parent_run_id):
                _common.require_run(connection, needed, lock=False)
            if run_id in runs.ancestors(connection, parent_run_id):
                raise InvalidInput(
                    f"Run {parent_run_id} descends from run {run_id}: parents cannot form a cycle."
                )
            runs.set_parent(connection, run_id, parent_run_id, self._clock.now())
            return self._load(connection, run_id)

    def get_run(self, run_id: uuid.UUID) -> Run:
        with self._store.read() as connection:
            return self._load(connection, run_id)

    def get_runs(self, run_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Run]:
        """Many runs at once (a page of dataset versions and the runs that made them)."""
        with self._store.read() as connection:
            return runs.get_runs(connection, list(dict.fromkeys(run_ids)))

    def list_runs(
        self,
        namespace: str,
        job: str,
        limit: int = 100,
        offset: int = 0,
        *,
        states: Sequence[RunState] = (),
        lot: str | None = None,
    ) -> Page[Run]:
        """The job's runs, newest first, narrowed to some ``states`` or to one ``lot``."""
        _common.check_page(limit, offset)
        stored_lot = None if lot is None else _common.lot_key(lot)
        with self._store.read() as connection:
            job_id = _common.require_job(connection, namespace, job).id
            return runs.list_runs(connection, job_id, limit, offset, states, stored_lot)

    def latest_states(self, names: Sequence[tuple[str, str]]) -> dict[tuple[str, str], RunState]:
        """The state of each (namespace, job)'s newest run; jobs that never ran are absent."""
        with self._store.read() as connection:
            return runs.latest_states(connection, list(dict.fromkeys(names)))

    def latest_runs(self, names: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Run]:
        """Each (namespace, job)'s newest run, as ``list_runs`` lists it first; jobs that never
        ran are absent. For a whole graph at once (``latestRun`` of its job nodes)."""
        with self._store.read() as connection:
            return runs.latest_runs(connection, list(dict.fromkeys(names)))

    def latest_runs_of_versions(
        self, namespace: str, job: str, version_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, Run]:
        """The newest run of each of the job's versions (``latestRun`` of a page of job versions);
        versions no run used are absent."""
        with self._store.read() as connection:
            job_id = _common.require_job(connection, namespace, job).id
            return runs.latest_runs_of_versions(connection, job_id, list(dict.fromkeys(version_ids)))

    def child_runs(self, parent_run_id: uuid.UUID) -> list[Run]:
        with self._store.read() as connection:
            _common.require_run(connection, parent_run_id, lock=False)
            return runs.child_runs(connection, parent_run_id)

    @staticmethod
    def _load(connection: Connection, run_id: uuid.UUID) -> Run:
        found = runs.get_run(connection, run_id)
        if found is None:
            raise NotFound("Run", str(run_id))
        return found
