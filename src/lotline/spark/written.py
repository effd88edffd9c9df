"""What an attempt wrote for each output: what the runner and child work hand each other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lotline.domain.checks import Verdict
from lotline.domain.manifests import ManifestDraft
from lotline.domain.model import FieldSpec
from lotline.services import facets as ol


@dataclass(frozen=True)
class Written:
    """What an attempt wrote for one output: its manifest draft, the output's fields and, for a
    checked output, the checks' verdict."""

    draft: ManifestDraft
    fields: tuple[FieldSpec, ...]
    verdict: Verdict | None = None
    #: What the lineage capture could not read of the write (Spark Connect: ``connect_plans``).
    not_captured: tuple[str, ...] = ()

    def version_facets(self) -> dict[str, Any]:
        return {**ol.version_facets(self.draft, self.fields), **ol.quality_facets(self.verdict)}


def verdicts_of(written: Mapping[str, Written]) -> dict[str, Verdict]:
    """The verdict of each checked output, in declared order."""
    return {name: w.verdict for name, w in written.items() if w.verdict is not None}
