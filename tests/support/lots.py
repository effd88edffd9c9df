"""A vocabulary for the seed-002 scenarios: datasets, registered jobs, claims, and the status rows.

Every step goes through the public service API (``lineage.lots``), like an operator or worker would.
"""

from __future__ import annotations

from collections.abc import Sequence

from lotline.domain.coordination import LotClaim, Role
from lotline.services import Lineage

NS = "lots"


class LotWorld:
    def __init__(self, lineage: Lineage, namespace: str = NS) -> None:
        self.lineage = lineage
        self.lots = lineage.lots
        self.ns = namespace
        lineage.catalog.upsert_namespace(namespace, owner_name="tests")

    def job(self, name: str, *, output: str, inputs: Sequence[str] = (), mapping: str | None = None) -> None:
        """Declare the datasets and register ``name`` as the producer of ``output``."""
        for dataset in (*inputs, output):
            self.lineage.catalog.upsert_dataset(self.ns, dataset)
        self.lots.register_job(self.ns, name, output=output, inputs=inputs, lot_mapping=mapping)

    def claim(self, job: str, lot: str | None = None, worker: str = "worker-1") -> LotClaim | None:
        return self.lots.claim(worker, self.ns, job, lot=lot)

    def produce(self, job: str, *lots: str) -> None:
        """Run ``job`` successfully on each named lot (a source job: it has no inputs)."""
        for lot in lots:
            claim = self.claim(job, lot)
            assert claim is not None
            self.lots.complete(claim)

    def status(self, dataset: str, lot: str, job: str, role: Role = Role.OUTPUT) -> str | None:
        """The status of the row (dataset, lot, job), or None when there is none."""
        for row in self.lots.status(self.ns, dataset=dataset, role=role):
            if (row.lot, row.job) == (lot, job):
                return row.status.value
        return None

    def table(self) -> set[tuple[str, str, str, str, str]]:
        """The whole data-status table as (dataset, lot, job, role, status)."""
        rows = self.lots.status(self.ns, role=None)
        return {(r.dataset, r.lot, r.job, r.role.value, r.status.value) for r in rows}

    def current_version_run(self, dataset: str, lot: str) -> object:
        version = self.lineage.versions.current_version(self.ns, dataset, lot)
        return None if version is None else version.run_id
