"""Manifests (SPEC §5): the list of objects one attempt at a lot consists of, and its state.

A reader of a lot takes exactly the objects its current manifest lists, never a directory
listing, so a half-written or failed attempt can never leak into what downstream reads. The
database holds the authoritative manifest; a JSON copy (``manifest_document``) is written to the
object store so that other tools can read a lot without the database.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from lotline.domain.errors import Conflict, InvalidInput


class ManifestState(StrEnum):
    COMPLETE = "complete"  # the attempt succeeded with data
    EMPTY = "empty"  # the attempt succeeded and the lot has no data: still present
    PARTIAL = "partial"  # the attempt failed: whatever it wrote, not yet removed
    REMOVED = "removed"  # a partial attempt whose objects were deleted


#: A successful manifest is final (a later version of the lot supersedes it through its dataset
#: version, not by changing state); a partial one may only have its objects removed.
MANIFEST_TRANSITIONS: Mapping[ManifestState, frozenset[ManifestState]] = {
    ManifestState.COMPLETE: frozenset(),
    ManifestState.EMPTY: frozenset(),
    ManifestState.PARTIAL: frozenset({ManifestState.REMOVED}),
    ManifestState.REMOVED: frozenset(),
}


def check_manifest_transition(current: ManifestState, target: ManifestState) -> None:
    if target not in MANIFEST_TRANSITIONS[current]:
        allowed = sorted(s.value for s in MANIFEST_TRANSITIONS[current])
        raise Conflict(
            f"A {current.value} manifest cannot become {target.value}.",
            current=current.value,
            allowed=allowed,
        )


class UriType(StrEnum):
    """How a manifest's uris name its objects (Clusterless's vocabulary): lotline lists files."""

    PATH = "path"


FORMATS = frozenset({"parquet", "csv", "json", "text", "binary"})


def check_format(format_: str) -> str:
    if format_ not in FORMATS:
        raise InvalidInput(f"format {format_!r} is not one of {sorted(FORMATS)}.")
    return format_


@dataclass(frozen=True)
class ManifestObject:
    """One object of a lot: where it is, how big, when written, how to read it."""

    uri: str
    size: int
    modified_at: datetime
    format: str
    partition_values: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.uri, str) or not self.uri:
            raise InvalidInput("a manifest object needs a uri.")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0:
            raise InvalidInput(f"object {self.uri}: size must be a non-negative integer, got {self.size!r}.")
        if self.modified_at.tzinfo is None:
            raise InvalidInput(f"object {self.uri}: modified time must be timezone-aware.")
        check_format(self.format)

    def to_json(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "size": self.size,
            "modifiedTime": self.modified_at.isoformat(),
            "format": self.format,
            "partitionValues": dict(self.partition_values),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ManifestObject:
        return cls(
            uri=doc["uri"],
            size=doc["size"],
            modified_at=datetime.fromisoformat(doc["modifiedTime"]),
            format=doc["format"],
            partition_values=dict(doc.get("partitionValues") or {}),
        )


def object_change(recorded: ManifestObject, size: int | None, modified_at: datetime | None) -> str | None:
    """How an object differs now (``size``, ``modified_at``; None: it is gone) from what its manifest
    recorded, as a phrase for an error; None if it is unchanged. A lot read from other bytes than
    those it was published with would be a silent lie, so readers check before they read."""
    if size is None or modified_at is None:
        return "it is gone"
    changes = []
    if size != recorded.size:
        changes.append(f"size {recorded.size} → {size}")
    if not _same_time(modified_at, recorded.modified_at):
        changes.append(f"modified {recorded.modified_at.isoformat()} → {modified_at.isoformat()}")
    return ", ".join(changes) or None


def _same_time(now: datetime, then: datetime) -> bool:
    """Equal, at whole seconds when either has none below (S3 lists times in milliseconds but gives
    one object's in whole seconds)."""
    if now.microsecond and then.microsecond:
        return now == then
    return now.replace(microsecond=0) == then.replace(microsecond=0)


@dataclass(frozen=True)
class ManifestDraft:
    """What a worker (or ingest) hands over when it finishes an attempt: the objects it wrote.

    The state follows from the outcome: a success with objects is complete, one without is empty,
    a failure is partial (``state_for``).
    """

    location: str
    objects: tuple[ManifestObject, ...] = ()
    row_count: int | None = None
    comment: str | None = None
    #: A child's part of the lot (``day=2023-01-02``); None for the lot's own manifest.
    part: str | None = None
    #: An empty lot: who declared it empty (``domain.arrival``); None for a lot with objects.
    declared_by: str | None = None

    def __post_init__(self) -> None:
        if self.declared_by is not None and self.objects:
            raise InvalidInput("only an empty lot is declared empty; this one lists objects.")
        if self.row_count is not None and (
            isinstance(self.row_count, bool) or not isinstance(self.row_count, int) or self.row_count < 0
        ):
            raise InvalidInput(f"row count must be a non-negative integer, got {self.row_count!r}.")
        uris = [o.uri for o in self.objects]
        if len(set(uris)) != len(uris):
            raise InvalidInput("a manifest lists each object once.")

    def state_for(self, *, success: bool) -> ManifestState:
        if not success:
            return ManifestState.PARTIAL
        return ManifestState.COMPLETE if self.objects else ManifestState.EMPTY


@dataclass(frozen=True)
class Manifest:
    """A manifest as the database holds it (the authority)."""

    id: uuid.UUID
    namespace: str
    dataset: str
    lot: str
    state: ManifestState
    attempt: int
    run_id: uuid.UUID | None
    version_id: uuid.UUID | None
    version_number: int | None
    uri_type: UriType
    location: str
    objects: tuple[ManifestObject, ...]
    row_count: int | None
    comment: str | None
    created_at: datetime
    updated_at: datetime
    #: A child's part of the lot; None for the lot's own manifest.
    part: str | None = None
    #: An empty lot: who declared it empty (None: a lot with objects, or one registered before
    #: lotline recorded it).
    declared_by: str | None = None
    #: When cleanup deleted the objects of this superseded version (None: they are kept). The
    #: manifest still lists them, as history; nothing may read them.
    objects_removed_at: datetime | None = None

    @property
    def total_bytes(self) -> int:
        return sum(o.size for o in self.objects)


def manifest_document(manifest: Manifest) -> dict[str, Any]:
    """The JSON copy written beside the data (Clusterless's fields plus lotline's)."""
    return {
        "state": manifest.state.value,
        "comment": manifest.comment,
        "lotId": manifest.lot,
        "namespace": manifest.namespace,
        "dataset": manifest.dataset,
        "manifestId": str(manifest.id),
        "version": None
        if manifest.version_id is None
        else {"id": str(manifest.version_id), "number": manifest.version_number},
        "runId": None if manifest.run_id is None else str(manifest.run_id),
        "attempt": manifest.attempt,
        "part": manifest.part,
        "declaredBy": manifest.declared_by,
        "uriType": manifest.uri_type.value,
        "location": manifest.location,
        "rowCount": manifest.row_count,
        "uris": [o.uri for o in manifest.objects],
        "objects": [o.to_json() for o in manifest.objects],
        "createdAt": manifest.created_at.isoformat(),
        "updatedAt": manifest.updated_at.isoformat(),
    }


class LotEventKind(StrEnum):
    READY = "READY"  # the lot was published: its manifest may be read
    REOPENED = "REOPENED"  # the lot was reopened (invalidation, late or corrected data): stop reading it
    FAILED = "FAILED"  # a claim of the lot failed (with its reason): nothing new to read, the lot is retried
    #: A source lot became due with nothing delivered (its arrival policy says missing); the lot's
    #: next READY event closes it.
    OVERDUE = "OVERDUE"


@dataclass(frozen=True)
class LotEvent:
    """One entry of the durable, ordered lot availability log (SPEC §5 "Events")."""

    position: int
    kind: LotEventKind
    namespace: str
    dataset: str
    lot: str
    manifest_id: uuid.UUID | None
    version_id: uuid.UUID | None
    run_id: uuid.UUID | None
    created_at: datetime
    #: The dataset's producing job (None: the dataset has none registered).
    job: str | None = None
    #: FAILED: the attempt that failed and its one-line reason (READY from a claim: its attempt).
    attempt: int | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "kind": self.kind.value,
            "namespace": self.namespace,
            "dataset": self.dataset,
            "lot": self.lot,
            "manifestId": None if self.manifest_id is None else str(self.manifest_id),
            "versionId": None if self.version_id is None else str(self.version_id),
            "runId": None if self.run_id is None else str(self.run_id),
            "createdAt": self.created_at.isoformat(),
            "job": self.job,
            "attempt": self.attempt,
            "reason": self.reason,
        }
