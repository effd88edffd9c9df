"""What a claim path is: how a worker takes a lot and ends its claim (docs/coordination.md)."""

from __future__ import annotations

import uuid
from collections.abc import Container
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from lotline.domain.coordination import LotClaim
from lotline.domain.manifests import ManifestDraft
from lotline.store.queries.events import JournalEntry


class LostRace(Exception):
    """Another worker took the lot between our search and our write: nothing was kept; look again."""


@dataclass(frozen=True)
class ClaimRequest:
    """A worker's request: the next eligible lot of ``job`` (or the named ``lot``, as stored)."""

    owner: str
    namespace: str
    job: str
    lot: str | None
    lease: timedelta
    #: Output lots to pass over although eligible.
    skip: Container[str] = ()


@dataclass(frozen=True)
class OutputEnd:
    """What a claim's end publishes for one of its job's outputs: the output's new version, the
    manifest draft of what the attempt wrote there and the version's facets. Every output has one,
    the claim's own dataset like the others (``LotService._output_ends`` builds them)."""

    dataset_id: uuid.UUID
    version_id: uuid.UUID
    manifest: ManifestDraft | None = None
    #: The new version's facets (``outputStatistics``…).
    facets: dict[str, Any] | None = None


@dataclass(frozen=True)
class ClaimEnd:
    """How a claim ends: its outcome, when (None: now) and what the attempt hands over."""

    success: bool
    at: datetime | None
    #: Every output's end, in the claim's order (``LotClaim.output_datasets``).
    outputs: tuple[OutputEnd, ...]
    #: The run's facets.
    facets: dict[str, Any] | None = None
    #: A failure's one-line reason, recorded as the run's ``error``.
    error: str | None = None
    #: The run's OpenLineage events (START and its end), journaled in the end's transaction.
    journal: tuple[JournalEntry, ...] = ()
    #: A failure's kind (``Failure.kind``), recorded as the run's ``error_kind``.
    error_kind: str | None = None


class ClaimPath(Protocol):
    def claim(self, request: ClaimRequest) -> LotClaim | None:
        """Take the lot and start its run; None if nothing is eligible. ``LostRace`` if another
        worker won the lot (nothing kept); a named lot that is not eligible is a Conflict."""
        ...

    def finish(self, claim: LotClaim, end: ClaimEnd) -> dict[uuid.UUID, uuid.UUID]:
        """End a live claim (fenced: a Conflict if it is no longer live) and its run, version its
        outputs; returns the id of each manifest it recorded, by output dataset id (none given: {})."""
        ...
