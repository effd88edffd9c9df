"""Quality results as OpenLineage carries them (``dataQualityAssertions``, ``dataQualityMetrics``):
keyed by the dataset version they arrived with, never inherited by a later version.

A run reports them for a version it wrote (output facets: lotline's checks) or read (input facets: a
dbt test, which sends them both as an input facet and as a dataset facet). A new version starts
without the dataset's earlier results; the dataset itself shows the latest that arrived."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from lotline.domain.model import JsonObject, Run, RunIoRole

QUALITY_FACETS = ("dataQualityAssertions", "dataQualityMetrics")


def quality_facets(facets: Mapping[str, object] | None) -> JsonObject:
    """The quality facets among these."""
    return {name: facets[name] for name in QUALITY_FACETS if facets and name in facets}


def without_quality(facets: Mapping[str, object]) -> JsonObject:
    """What a new version inherits of its dataset's facets: all but the quality results, which
    belong to the versions they were reported for."""
    return {name: value for name, value in facets.items() if name not in QUALITY_FACETS}


@dataclass(frozen=True)
class Source:
    """Who reported quality results for what: the run, on which side (it wrote or read the
    version), and the version of which dataset."""

    run_id: uuid.UUID | None
    role: RunIoRole
    namespace: str
    dataset: str
    version_id: uuid.UUID | None
    version_number: int | None


@dataclass(frozen=True)
class Assertion:
    """One row of a quality table: what was asserted, on which column, whether it held."""

    assertion: str
    column: str | None
    success: bool | None
    severity: str | None
    name: str | None
    source: Source


@dataclass(frozen=True)
class Reported:
    """The quality facets one run reported for one version of a dataset."""

    source: Source
    facets: JsonObject

    def assertions(self) -> list[Assertion]:
        """The ``dataQualityAssertions`` as rows (malformed entries are skipped: any producer may
        send them)."""
        facet = self.facets.get("dataQualityAssertions")
        found = facet.get("assertions") if isinstance(facet, dict) else None
        rows = []
        for entry in found if isinstance(found, list) else ():
            if not isinstance(entry, dict) or not isinstance(entry.get("assertion"), str):
                continue
            success = entry.get("success")
            rows.append(
                Assertion(
                    assertion=entry["assertion"],
                    column=_text(entry.get("column")),
                    success=success if isinstance(success, bool) else None,
                    severity=_text(entry.get("severity")),
                    name=_text(entry.get("name")),
                    source=self.source,
                )
            )
        return rows

    @property
    def metrics(self) -> JsonObject:
        facet = self.facets.get("dataQualityMetrics")
        return facet if isinstance(facet, dict) else {}


def run_reports(run: Run) -> list[Reported]:
    """The quality results a run reported for the versions it read and wrote (its io facets)."""
    sides = ((RunIoRole.INPUT, run.inputs), (RunIoRole.OUTPUT, run.outputs))
    return [
        Reported(Source(run.id, role, io.namespace, io.dataset, io.version, io.version_number), quality)
        for role, items in sides
        for io in items
        if (quality := quality_facets(io.facets))
    ]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
