"""A small vocabulary for writing the seeds' scenarios as tests: jobs, runs, datasets, versions.

Every step goes through the public service API; nothing here touches the database directly.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from lotline.domain.model import DatasetRef, DatasetVersion
from lotline.domain.runs import RunAction
from lotline.services import Lineage

NS = "scenarios"


class World:
    def __init__(self, lineage: Lineage, namespace: str = NS) -> None:
        self.lineage = lineage
        self.ns = namespace
        lineage.catalog.upsert_namespace(namespace, owner_name="tests")
        self.run_ids: dict[str, uuid.UUID] = {}

    # -- making things happen ------------------------------------------------------------------
    def declare(self, *datasets: str) -> None:
        for name in datasets:
            self.lineage.catalog.upsert_dataset(self.ns, name)

    def ref(self, dataset: str, lot: str | None = None) -> DatasetRef:
        return DatasetRef(self.ns, dataset, lot)

    def start(
        self,
        label: str,
        *,
        consumes: Sequence[str] = (),
        produces: Sequence[str] = (),
        parent: str | None = None,
        lot: str | None = None,
    ) -> uuid.UUID:
        """Declare the job's inputs and outputs, then create and start a run (``JobA@Run1``: job JobA)."""
        job = label.split("@", maxsplit=1)[0]
        self.declare(*consumes, *produces)
        self.lineage.catalog.upsert_job(
            self.ns, job, inputs=[self.ref(d) for d in consumes], outputs=[self.ref(d) for d in produces]
        )
        run = self.lineage.runs.create_run(
            self.ns, job, lot=lot, parent_run_id=self.run_ids[parent] if parent else None
        )
        self.run_ids[label] = run.id
        self.lineage.runs.transition(run.id, RunAction.START)
        return run.id

    def finish(self, label: str, outcome: str) -> None:
        action = {"succeeds": RunAction.COMPLETE, "fails": RunAction.FAIL, "aborts": RunAction.ABORT}[outcome]
        self.lineage.runs.transition(self.run_ids[label], action)

    def run(
        self,
        label: str,
        outcome: str,
        *,
        consumes: Sequence[str] = (),
        produces: Sequence[str] = (),
        parent: str | None = None,
    ) -> uuid.UUID:
        run_id = self.start(label, consumes=consumes, produces=produces, parent=parent)
        self.finish(label, outcome)
        return run_id

    def given_version_exists(self, dataset: str) -> None:
        """Bring ``dataset`` to V1 through a run of a loader job, as it would arrive in practice."""
        self.run(f"load_{dataset}@Run1", "succeeds", produces=[dataset])

    # -- looking at the outcome ----------------------------------------------------------------
    def versions(self, dataset: str) -> dict[int, str]:
        """Version number -> state, for every version of the dataset."""
        page = self.lineage.versions.list_versions(self.ns, dataset)
        return {v.number: v.state.value for v in page.items}

    def current(self, dataset: str) -> int | None:
        version = self.lineage.versions.current_version(self.ns, dataset)
        return version.number if version else None

    def version(self, dataset: str, number: int) -> DatasetVersion:
        [found] = [
            v for v in self.lineage.versions.list_versions(self.ns, dataset).items if v.number == number
        ]
        return found

    def consumed(self, label: str) -> dict[str, int | None]:
        run = self.lineage.runs.get_run(self.run_ids[label])
        return {io.dataset: io.version_number for io in run.inputs}

    def produced(self, label: str) -> dict[str, int | None]:
        run = self.lineage.runs.get_run(self.run_ids[label])
        return {io.dataset: io.version_number for io in run.outputs}
