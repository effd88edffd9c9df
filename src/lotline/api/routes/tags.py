"""``/tags``."""

from __future__ import annotations

from fastapi import APIRouter

from lotline.api.deps import Page, Services
from lotline.api.dto import Json, TagIn, tag_json

router = APIRouter(prefix="/tags", tags=["tags"])


@router.get("")
def list_tags(lineage: Services, page: Page) -> Json:
    found = lineage.tags.list_tags(page.limit, page.offset)
    return {"tags": [tag_json(t) for t in found.items], "totalCount": found.total_count}


@router.put("/{tag:seg}")
def put_tag(tag: str, body: TagIn, lineage: Services) -> Json:
    return tag_json(lineage.tags.upsert_tag(tag, body.description))
