"""Request bodies (Pydantic) and response JSON in Marquez's shapes, kept apart from domain records.

Field names are camelCase as Marquez spells them; unknown request fields are ignored, as
Marquez does, so newer clients keep working.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lotline.domain.coordination import LotStatus
from lotline.domain.graph import GraphNode
from lotline.domain.json_depth import bounded
from lotline.domain.model import (
    Dataset,
    DatasetRef,
    DatasetVersion,
    FieldSpec,
    Job,
    JobVersion,
    Namespace,
    Run,
    RunIO,
    Source,
)
from lotline.domain.runs import listed_facets
from lotline.domain.tags import DatasetTags, Tag

Json = dict[str, Any]


class Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class NamespaceIn(Body):
    ownerName: str | None = None
    description: str | None = None


class SourceIn(Body):
    type: str
    connectionUrl: str | None = None
    description: str | None = None


class FieldIn(Body):
    name: str
    type: str | None = None
    tags: list[str] = Field(default_factory=list)
    description: str | None = None


class DatasetIn(Body):
    type: str = "DB_TABLE"
    physicalName: str | None = None
    sourceName: str | None = None
    fields: list[FieldIn] | None = None
    tags: list[str] = Field(default_factory=list)
    description: str | None = None
    runId: uuid.UUID | None = None
    schemaLocation: str | None = None


class DatasetIdIn(Body):
    namespace: str
    name: str


class JobIn(Body):
    type: str = "BATCH"
    inputs: list[DatasetIdIn] = Field(default_factory=list)
    outputs: list[DatasetIdIn] = Field(default_factory=list)
    location: str | None = None
    description: str | None = None
    runId: uuid.UUID | None = None


class RunIn(Body):
    id: uuid.UUID | None = None
    nominalStartTime: datetime | None = None
    nominalEndTime: datetime | None = None
    args: dict[str, str] | None = None


class TagIn(Body):
    description: str | None = None


def time(value: datetime | None) -> str | None:
    """RFC 3339 in UTC with a ``Z``, as Marquez writes times."""
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def namespace_json(ns: Namespace) -> Json:
    return {
        "name": ns.name,
        "createdAt": time(ns.created_at),
        "updatedAt": time(ns.updated_at),
        "ownerName": ns.owner_name,
        "description": ns.description,
        "isHidden": ns.is_hidden,
    }


def source_json(source: Source) -> Json:
    return {
        "type": source.type,
        "name": source.name,
        "createdAt": time(source.created_at),
        "updatedAt": time(source.updated_at),
        "connectionUrl": source.connection_url,
        "description": source.description,
    }


def _fields(fields: tuple[FieldSpec, ...], tags: DatasetTags) -> list[Json]:
    return [
        {
            "name": f.name,
            "type": f.type,
            "tags": list(tags.field_tags.get(f.name, ())),
            "description": f.description,
        }
        for f in fields
    ]


def dataset_json(dataset: Dataset, tags: DatasetTags) -> Json:
    return {
        "id": {"namespace": dataset.namespace, "name": dataset.name},
        "type": dataset.type,
        "name": dataset.name,
        "physicalName": dataset.physical_name,
        "createdAt": time(dataset.created_at),
        "updatedAt": time(dataset.updated_at),
        "namespace": dataset.namespace,
        "sourceName": dataset.source_name,
        "fields": _fields(dataset.fields, tags),
        "tags": list(tags.tags),
        "lastModifiedAt": time(dataset.last_modified_at) if dataset.last_modified_at else None,
        "lastLifecycleState": None,
        "description": dataset.description,
        "currentVersion": str(dataset.current_version) if dataset.current_version else None,
        "facets": bounded(dataset.facets),
        "deleted": False,
        **({"schemaLocation": dataset.schema_location} if dataset.type == "STREAM" else {}),
    }


def dataset_version_json(version: DatasetVersion, dataset: Dataset, run: Run | None) -> Json:
    return {
        "id": {"namespace": version.namespace, "name": version.dataset, "version": str(version.id)},
        "type": dataset.type,
        "name": version.dataset,
        "physicalName": dataset.physical_name,
        "createdAt": time(version.created_at),
        "version": str(version.id),
        "namespace": version.namespace,
        "sourceName": dataset.source_name,
        "fields": _fields(version.fields, DatasetTags()),
        "tags": [],
        "lifecycleState": None,
        "description": dataset.description,
        "createdByRun": run_json(run, listed=True) if run else None,
        "facets": bounded(version.facets),
        # lotline additions: the version's number, lot and state (current / failed / superseded).
        "versionNumber": version.number,
        "lot": version.lot,
        "state": version.state.value,
    }


def _ref(ref: DatasetRef) -> Json:
    return {"namespace": ref.namespace, "name": ref.name}


def job_json(job: Job, latest_run: Run | None, facets: Json) -> Json:
    return {
        "id": {"namespace": job.namespace, "name": job.name},
        "type": job.type,
        "name": job.name,
        "simpleName": job.simple_name,
        "parentJobName": job.parent.name if job.parent else None,
        "createdAt": time(job.created_at),
        "updatedAt": time(job.updated_at),
        "namespace": job.namespace,
        "inputs": [_ref(r) for r in job.inputs],
        "outputs": [_ref(r) for r in job.outputs],
        # lotline: the inputs its runs read without declaring them (also in inputs)
        "undeclaredInputs": [_ref(r) for r in job.undeclared_inputs],
        "location": job.location,
        "description": job.description,
        "latestRun": run_json(latest_run, listed=True) if latest_run else None,
        "latestRuns": [run_json(latest_run, listed=True)] if latest_run else [],
        "facets": bounded(facets),
        "currentVersion": str(job.current_version) if job.current_version else None,
        "tags": list(job.tags),
    }


def job_version_json(version: JobVersion, latest_run: Run | None) -> Json:
    return {
        "id": {"namespace": version.namespace, "name": version.job, "version": str(version.id)},
        "name": version.job,
        "namespace": version.namespace,
        "version": str(version.id),
        "createdAt": time(version.created_at),
        "location": version.location,
        "inputs": [_ref(r) for r in version.inputs],
        "outputs": [_ref(r) for r in version.outputs],
        "undeclaredInputs": [_ref(r) for r in version.undeclared_inputs],
        "latestRun": run_json(latest_run, listed=True) if latest_run else None,
    }


def _io(items: tuple[RunIO, ...]) -> list[Json]:
    return [
        {
            "datasetVersionId": {
                "namespace": io.namespace,
                "name": io.dataset,
                "version": str(io.version),
            },
            "facets": bounded(io.facets),
        }
        for io in items
        if io.version is not None
    ]


def run_json(run: Run, *, listed: bool = False) -> Json:
    """A run as Marquez answers it; ``listed`` (a list of runs, a job's or a version's latest run),
    without its heavy facets (``domain.runs.listed_facets``)."""
    return {
        "id": str(run.id),
        "createdAt": time(run.created_at),
        "updatedAt": time(run.updated_at),
        "nominalStartTime": time(run.nominal_start_time),
        "nominalEndTime": time(run.nominal_end_time),
        "state": run.state.value,
        "startedAt": time(run.started_at),
        "endedAt": time(run.ended_at),
        "durationMs": run.duration_ms,
        "args": run.args,
        "jobVersion": (
            {"namespace": run.namespace, "name": run.job, "version": str(run.job_version)}
            if run.job_version
            else None
        ),
        "inputDatasetVersions": _io(run.inputs),
        "outputDatasetVersions": _io(run.outputs),
        "facets": bounded(listed_facets(run.facets) if listed else run.facets),
        # lotline additions.
        "parentRunId": str(run.parent_run_id) if run.parent_run_id else None,
        "lot": run.lot,
    }


def tag_json(tag: Tag) -> Json:
    return {"name": tag.name, "description": tag.description}


def graph_node_json(node: GraphNode, data: Json) -> Json:
    return {
        "id": node.key.id,
        "type": node.key.type.value,
        "data": data,
        "inEdges": [{"origin": e.origin, "destination": e.destination} for e in node.in_edges],
        "outEdges": [{"origin": e.origin, "destination": e.destination} for e in node.out_edges],
    }


def lot_status_json(row: LotStatus) -> Json:
    """One data-status row (SPEC §4) with its arc state (SPEC §5) and the lock its status implies."""
    return {
        "namespace": row.namespace,
        "dataset": row.dataset,
        "lot": row.lot,
        "job": row.job,
        "role": row.role.value,
        "status": row.status.value,
        "heldStatus": row.held_status.value if row.held_status else None,
        "arcState": row.arc.value if row.arc else None,
        "lock": row.lock,
        "attempt": row.attempt,
        "owner": row.owner,
        "leaseExpiresAt": time(row.lease_expires_at),
        "runId": str(row.run_id) if row.run_id else None,
        "error": row.error,
        "gaveUpAfter": row.gave_up_after,
    }
