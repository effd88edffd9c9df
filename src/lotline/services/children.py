"""Child work (SPEC §5): a claimed lot computed in parts, each part a child run with its own manifest.

The lot's claim and run stay the unit of coordination: children run under the claim, and the lot
becomes READY only through ``LotService.complete`` once every part is complete (its manifest then
lists every part's objects). A part that fails is a FAILED child run whose partial manifest is
removed with its objects; the parts that succeeded keep their complete manifests, and the next
attempt at the lot takes them over instead of running them again (``kept``) — as long as they were
computed from the same input versions by the same job version. Child runs read what their parent
reads and mint no dataset versions: the lot's version is the parent run's, so SPEC §3 rule 6 holds
trivially and a lot never has two current versions.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace

from lotline.domain import failures
from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.coordination import LotClaim
from lotline.domain.errors import Conflict, InvalidInput
from lotline.domain.failures import Failure
from lotline.domain.manifests import Manifest, ManifestDraft
from lotline.domain.runs import RunAction, RunState
from lotline.services import facets
from lotline.services.emission import EmissionService
from lotline.services.manifests import ManifestService
from lotline.services.recording import apply_transition, version_unpinned_inputs
from lotline.store.engine import Store
from lotline.store.queries import manifests as manifest_rows
from lotline.store.queries import runs


class ChildWork:
    def __init__(
        self, store: Store, manifests: ManifestService, emission: EmissionService, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self._store = store
        self._clock = clock
        self._manifests = manifests
        self._emission = emission

    def kept(self, claim: LotClaim) -> dict[str, dict[str, Manifest]]:
        """The parts of the claimed lot that failed attempts since its last success completed, from
        the same input versions with the same job version as this attempt: they are not run again.
        (A lot reopened after it succeeded is computed whole again: that is what reopening asks.)
        By part, each output's manifest of it: a job with several outputs keeps a part only where
        one child run completed it for every output."""
        with self._store.read() as connection:
            parts = [
                m
                for _, dataset_id in claim.output_datasets
                for m in manifest_rows.complete_parts(connection, dataset_id, claim.lot)
            ]
            if not parts:
                return {}
            lot_runs = runs.lot_runs(connection, claim.job_id, claim.lot)
            run_ids = [claim.run_id, *(m.run_id for m in parts if m.run_id is not None)]
            inputs = runs.pinned_inputs(connection, run_ids)
            parents = runs.parents_and_versions(connection, run_ids)
        completed = [i for i, (_, state) in enumerate(lot_runs) if state is RunState.COMPLETED]
        since_success = lot_runs[completed[-1] + 1 :] if completed else lot_runs
        failed_attempts = {run_id for run_id, state in since_success if state is RunState.FAILED}
        version = parents[claim.run_id][1]
        found: dict[str, dict[str, Manifest]] = {}
        for manifest in parts:
            if manifest.run_id is None or manifest.part is None:
                continue
            parent, child_version = parents[manifest.run_id]
            if (
                parent in failed_attempts
                and child_version == version
                and inputs[manifest.run_id] == inputs[claim.run_id]
            ):
                # Oldest first: a later complete one of a part wins.
                found.setdefault(manifest.part, {})[manifest.dataset] = manifest
        names = {name for name, _ in claim.output_datasets}
        return {
            part: by_output
            for part, by_output in found.items()
            if set(by_output) == names and len({m.run_id for m in by_output.values()}) == 1
        }

    def start(self, claim: LotClaim, part: str) -> uuid.UUID:
        """A RUNNING child run of the claim's run for one part, reading what the lot's run reads."""
        with self._store.write() as connection:
            parent = runs.lock_run(connection, claim.run_id)
            if parent is None or parent.state is not RunState.RUNNING:
                raise _lost(claim, part)
            now = self._clock.now()
            child_id = uuid.uuid4()
            read = runs.pinned_inputs(connection, [claim.run_id])[claim.run_id]
            _child, unpinned = runs.insert_run(
                connection,
                run_id=child_id,
                job_id=claim.job_id,
                job_version_id=parent.job_version_id,
                parent_run_id=claim.run_id,
                lot=claim.lot,
                nominal_start_time=parent.nominal_start_time,
                nominal_end_time=parent.nominal_end_time,
                args={},
                facets={
                    "lotline_part": facets.custom(part=part, attempt=claim.attempt),
                    **facets.lot_facets(claim.lot),
                },
                now=now,
                transitions=[(RunState.NEW, now), (RunState.RUNNING, now)],
                inputs=sorted({(dataset_id, lot) for dataset_id, lot, _ in read}),
                pin=True,
            )
            version_unpinned_inputs(connection, unpinned, now)
        self._emission.part_started(claim, child_id, part)
        return child_id

    def finish(
        self,
        claim: LotClaim,
        child_run_id: uuid.UUID,
        part: str,
        drafts: Mapping[str, ManifestDraft],
        error: BaseException | str | Failure | None = None,
    ) -> dict[str, Manifest]:
        """End a child run: COMPLETED with a complete (or empty) manifest of its part, or FAILED with
        the error (its one-line reason in ``runs.error``) and a partial manifest of what it wrote,
        whose objects are then removed. A part
        that succeeds after the lot's claim was lost is recorded as failed: its lot was given up.
        ``drafts`` are the outputs' by name (every output of a job with several); each output gets
        its manifest of ``part``. Returns them by output."""
        ids = dict(claim.output_datasets)
        unknown = sorted(set(drafts) - set(ids))
        if unknown:
            raise InvalidInput(f"job {claim.job} has no output {', '.join(unknown)}.")
        with self._store.write() as connection:
            parent = runs.lock_run(connection, claim.run_id)
            if error is None and (parent is None or parent.state is not RunState.RUNNING):
                error = _lost(claim, part).message
            success = error is None
            now = self._clock.now()
            apply_transition(connection, child_run_id, RunAction.COMPLETE if success else RunAction.FAIL)
            if error is not None:
                failure = failures.failure_of(error)
                child = runs.lock_run(connection, child_run_id)
                if child is not None:
                    runs.merge_run_facets(
                        connection, child, {"errorMessage": facets.error_message(failure)}, now
                    )
                    runs.set_error(connection, child_run_id, failure.reason, now, failure.kind)
            manifest_ids = {name: uuid.uuid4() for name in drafts}
            for name, draft in drafts.items():
                manifest_rows.insert_manifest(
                    connection,
                    manifest_id=manifest_ids[name],
                    dataset_id=ids[name],
                    lot=claim.lot,
                    run_id=child_run_id,
                    version_id=None,
                    attempt=claim.attempt,
                    state=draft.state_for(success=success),
                    draft=replace(draft, part=part),
                    now=now,
                )
        self._emission.part_ended(claim, child_run_id, part, error)
        if success:
            return {name: self._manifests.get(m) for name, m in manifest_ids.items()}
        for manifest_id in manifest_ids.values():
            self._manifests.publish_copy(manifest_id)
        return {name: self._manifests.remove_partial(m) for name, m in manifest_ids.items()}


def _lost(claim: LotClaim, part: str) -> Conflict:
    return Conflict(
        f"lot {claim.lot} (attempt {claim.attempt}) is no longer claimed: part {part} is not recorded "
        "as done; the lot will be run again",
        current="not owned",
    )
