"""Immutable records of the lineage core, as the services hand them to every interface."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Generic, TypeVar

from lotline.domain.runs import RunState
from lotline.domain.versions import VersionState

T = TypeVar("T")
JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Page(Generic[T]):
    items: Sequence[T]
    total_count: int


@dataclass(frozen=True)
class Namespace:
    name: str
    owner_name: str | None
    description: str | None
    created_at: datetime
    updated_at: datetime
    #: Deleted (Marquez's soft delete): listed no more, back when written again.
    is_hidden: bool = False


@dataclass(frozen=True)
class Source:
    name: str
    type: str
    connection_url: str | None
    description: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class DatasetRef:
    """Names one dataset, optionally one lot of it (``lot=None``: the dataset is not partitioned)."""

    namespace: str
    name: str
    lot: str | None = None


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class DatasetRead:
    """A dataset a run was seen reading without its job declaring it (dynamic lineage, SPEC §7)."""

    dataset: DatasetRef
    physical_name: str
    fields: tuple[FieldSpec, ...] = ()


@dataclass(frozen=True)
class Dataset:
    namespace: str
    name: str
    type: str
    physical_name: str | None
    source_name: str | None
    description: str | None
    fields: tuple[FieldSpec, ...]
    facets: JsonObject
    created_at: datetime
    updated_at: datetime
    current_version: uuid.UUID | None
    #: When a successful run last wrote it (the current version's creation), as Marquez reports it.
    last_modified_at: datetime | None = None
    #: Where a STREAM dataset's schema is published (Marquez's ``schemaLocation``).
    schema_location: str | None = None


@dataclass(frozen=True)
class DatasetVersion:
    id: uuid.UUID
    namespace: str
    dataset: str
    number: int
    lot: str | None
    state: VersionState
    run_id: uuid.UUID | None
    fields: tuple[FieldSpec, ...]
    created_at: datetime
    #: The dataset facets it was made with (and its writer's output facets).
    facets: JsonObject = field(default_factory=dict)


@dataclass(frozen=True)
class JobRef:
    namespace: str
    name: str


@dataclass(frozen=True)
class Job:
    namespace: str
    name: str
    type: str
    description: str | None
    location: str | None
    inputs: tuple[DatasetRef, ...]
    outputs: tuple[DatasetRef, ...]
    current_version: uuid.UUID | None
    created_at: datetime
    updated_at: datetime
    #: Inputs its runs were seen reading without declaring them (also in ``inputs``).
    undeclared_inputs: tuple[DatasetRef, ...] = ()
    #: The job of its runs' parent run (OpenLineage parent facet), in the same namespace or not.
    parent: JobRef | None = None
    tags: tuple[str, ...] = ()
    #: OpenLineage job facets, merged event by event.
    facets: JsonObject = field(default_factory=dict)

    @property
    def simple_name(self) -> str:
        """Its name without its parent's prefix (``dag.task`` under ``dag``: ``task``), as Marquez."""
        if self.parent is not None and self.name.startswith(self.parent.name + "."):
            return self.name[len(self.parent.name) + 1 :]
        return self.name


@dataclass(frozen=True)
class JobVersion:
    id: uuid.UUID
    namespace: str
    job: str
    location: str | None
    inputs: tuple[DatasetRef, ...]
    outputs: tuple[DatasetRef, ...]
    created_at: datetime
    #: Inputs its runs were seen reading without declaring them (also in ``inputs``).
    undeclared_inputs: tuple[DatasetRef, ...] = ()


class RunIoRole(Enum):
    """Which side of a run a dataset (lot) is on: read (``INPUT``) or written (``OUTPUT``). The
    values are those stored in ``job_version_io.role``."""

    INPUT = "INPUT"
    OUTPUT = "OUTPUT"


@dataclass(frozen=True)
class RunIO:
    """One dataset (lot) a run read or wrote, with the version it was pinned to (if any yet)."""

    namespace: str
    dataset: str
    lot: str | None
    version: uuid.UUID | None
    version_number: int | None
    #: The quality results the run reported for it (``run_inputs.facets``, ``run_outputs.facets``).
    facets: JsonObject = field(default_factory=dict)


@dataclass(frozen=True)
class RunTransition:
    state: RunState
    at: datetime


@dataclass(frozen=True)
class Run:
    id: uuid.UUID
    namespace: str
    job: str
    job_version: uuid.UUID | None
    parent_run_id: uuid.UUID | None
    lot: str | None
    state: RunState
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    nominal_start_time: datetime | None
    nominal_end_time: datetime | None
    args: JsonObject = field(default_factory=dict)
    facets: JsonObject = field(default_factory=dict)
    inputs: tuple[RunIO, ...] = ()
    outputs: tuple[RunIO, ...] = ()
    transitions: tuple[RunTransition, ...] = ()

    @property
    def duration_ms(self) -> int | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return int((self.ended_at - self.started_at).total_seconds() * 1000)
