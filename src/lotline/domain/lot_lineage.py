"""Lot lineage: which lots of which inputs fed one lot of a dataset, through which runs and versions,
and which lots it fed in turn. Marquez's lineage is between datasets; this is between lots."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from lotline.domain.runs import RunState
from lotline.domain.versions import VersionState


@dataclass(frozen=True)
class LotVersion:
    """One lot of a dataset at one version (None: a lot read before it had a version)."""

    namespace: str
    dataset: str
    lot: str
    version_id: uuid.UUID | None
    version_number: int | None
    version_state: VersionState | None

    @property
    def key(self) -> str:
        return f"v:{self.version_id}" if self.version_id else f"l:{self.namespace}:{self.dataset}:{self.lot}"


@dataclass(frozen=True)
class LotRun:
    """A run that read some lot versions and wrote others."""

    id: uuid.UUID
    namespace: str
    job: str
    lot: str | None
    state: RunState
    started_at: datetime | None
    ended_at: datetime | None

    @property
    def key(self) -> str:
        return f"r:{self.id}"


@dataclass(frozen=True)
class LotLineage:
    """The lot asked about (``root``), every lot version and run within the depth, and the edges:
    (lot version key, run key) for a read, (run key, lot version key) for a write. ``truncated``
    says the walk stopped at its node limit."""

    root: LotVersion
    lots: tuple[LotVersion, ...]
    runs: tuple[LotRun, ...]
    edges: tuple[tuple[str, str], ...]
    truncated: bool
