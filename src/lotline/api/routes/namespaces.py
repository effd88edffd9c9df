"""``/namespaces`` and ``/sources``."""

from __future__ import annotations

from fastapi import APIRouter

from lotline.api.deps import Page, Services
from lotline.api.dto import Json, NamespaceIn, SourceIn, namespace_json, source_json

router = APIRouter(tags=["namespaces", "sources"])


@router.get("/namespaces")
def list_namespaces(lineage: Services, page: Page) -> Json:
    found = lineage.catalog.list_namespaces(page.limit, page.offset)
    return {"namespaces": [namespace_json(n) for n in found.items], "totalCount": found.total_count}


@router.get("/namespaces/{namespace:seg}")
def get_namespace(namespace: str, lineage: Services) -> Json:
    return namespace_json(lineage.catalog.get_namespace(namespace))


@router.put("/namespaces/{namespace:seg}")
def put_namespace(namespace: str, body: NamespaceIn, lineage: Services) -> Json:
    return namespace_json(lineage.catalog.upsert_namespace(namespace, body.ownerName, body.description))


@router.delete("/namespaces/{namespace:seg}")
def delete_namespace(namespace: str, lineage: Services) -> Json:
    """Soft delete, as Marquez: hidden with its datasets and jobs; answers it as it was."""
    return namespace_json(lineage.catalog.delete_namespace(namespace))


@router.get("/sources")
def list_sources(lineage: Services, page: Page) -> Json:
    found = lineage.catalog.list_sources(page.limit, page.offset)
    return {"sources": [source_json(s) for s in found.items], "totalCount": found.total_count}


@router.get("/sources/{source:seg}")
def get_source(source: str, lineage: Services) -> Json:
    return source_json(lineage.catalog.get_source(source))


@router.put("/sources/{source:seg}")
def put_source(source: str, body: SourceIn, lineage: Services) -> Json:
    return source_json(lineage.catalog.upsert_source(source, body.type, body.connectionUrl, body.description))
