"""``/namespaces/{ns}/datasets``: metadata, versions, tags, soft delete."""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from lotline.api.deps import Page, Services
from lotline.api.dto import DatasetIn, Json, dataset_json, dataset_version_json
from lotline.domain.model import Dataset, FieldSpec
from lotline.services import Lineage

router = APIRouter(prefix="/namespaces/{namespace:seg}/datasets", tags=["datasets"])


def present(lineage: Lineage, datasets: list[Dataset]) -> list[Json]:
    tags = lineage.tags.dataset_tags([(d.namespace, d.name) for d in datasets])
    return [dataset_json(d, tags[(d.namespace, d.name)]) for d in datasets]


@router.get("")
def list_datasets(namespace: str, lineage: Services, page: Page) -> Json:
    found = lineage.catalog.list_datasets(namespace, page.limit, page.offset)
    return {"datasets": present(lineage, list(found.items)), "totalCount": found.total_count}


@router.get("/{dataset:seg}")
def get_dataset(namespace: str, dataset: str, lineage: Services) -> Json:
    """Marquez's dataset, and lotline's: a source's arrival policy (``arrivalPolicy``: null for a
    dataset without one stored) and the dataset's freshness (``freshness``: null without time lots)."""
    found = present(lineage, [lineage.catalog.get_dataset(namespace, dataset)])[0]
    policy = lineage.arrival.of(namespace, dataset)
    return {
        **found,
        "arrivalPolicy": None if policy is None else policy.to_json(),
        "freshness": lineage.gaps.freshness(namespace, dataset=dataset),
    }


@router.put("/{dataset:seg}")
def put_dataset(namespace: str, dataset: str, body: DatasetIn, lineage: Services) -> Json:
    """With ``runId`` the write is that run's output, versioned by the run's outcome (SPEC §3). The
    dataset, its fields and their tags are written in one transaction."""
    lineage.catalog.upsert_dataset(
        namespace,
        dataset,
        type=body.type,
        physical_name=body.physicalName,
        source=body.sourceName,
        fields=_fields(body),
        description=body.description,
        run_id=body.runId,
        schema_location=body.schemaLocation,
        tags=body.tags,
        field_tags={f.name: f.tags for f in body.fields or [] if f.tags},
    )
    return present(lineage, [lineage.catalog.get_dataset(namespace, dataset)])[0]


def _fields(body: DatasetIn) -> list[FieldSpec] | None:
    return None if body.fields is None else [FieldSpec(f.name, f.type, f.description) for f in body.fields]


@router.delete("/{dataset:seg}")
def delete_dataset(namespace: str, dataset: str, lineage: Services) -> Json:
    found = lineage.catalog.delete_dataset(namespace, dataset)
    return {**present(lineage, [found])[0], "deleted": True}


@router.get("/{dataset:seg}/versions")
def list_versions(namespace: str, dataset: str, lineage: Services, page: Page) -> Json:
    found = lineage.versions.list_versions(namespace, dataset, limit=page.limit, offset=page.offset)
    current = lineage.catalog.get_dataset(namespace, dataset)
    made_by = lineage.runs.get_runs([v.run_id for v in found.items if v.run_id is not None])
    return {
        "versions": [
            dataset_version_json(v, current, made_by.get(v.run_id) if v.run_id else None) for v in found.items
        ],
        "totalCount": found.total_count,
    }


@router.get("/{dataset:seg}/versions/{version}")
def get_version(namespace: str, dataset: str, version: uuid.UUID, lineage: Services) -> Json:
    return _version(lineage, version, namespace, dataset, lineage.catalog.get_dataset(namespace, dataset))


def _version(lineage: Lineage, version_id: uuid.UUID, namespace: str, dataset: str, current: Dataset) -> Json:
    version = lineage.versions.get_version(namespace, dataset, version_id)
    run = lineage.runs.get_run(version.run_id) if version.run_id else None
    return dataset_version_json(version, current, run)


@router.post("/{dataset:seg}/tags/{tag:seg}")
def tag_dataset(namespace: str, dataset: str, tag: str, lineage: Services) -> Json:
    lineage.tags.tag_dataset(namespace, dataset, tag)
    return get_dataset(namespace, dataset, lineage)


@router.delete("/{dataset:seg}/tags/{tag:seg}")
def untag_dataset(namespace: str, dataset: str, tag: str, lineage: Services) -> Json:
    lineage.tags.tag_dataset(namespace, dataset, tag, remove=True)
    return get_dataset(namespace, dataset, lineage)


@router.post("/{dataset:seg}/fields/{field:seg}/tags/{tag:seg}")
def tag_field(namespace: str, dataset: str, field: str, tag: str, lineage: Services) -> Json:
    lineage.tags.tag_field(namespace, dataset, field, tag)
    return get_dataset(namespace, dataset, lineage)


@router.delete("/{dataset:seg}/fields/{field:seg}/tags/{tag:seg}")
def untag_field(namespace: str, dataset: str, field: str, tag: str, lineage: Services) -> Json:
    lineage.tags.tag_field(namespace, dataset, field, tag, remove=True)
    return get_dataset(namespace, dataset, lineage)
