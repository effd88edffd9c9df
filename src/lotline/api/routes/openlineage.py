"""``GET /lineage/status`` and ``GET /events/lineage``: the OpenLineage journal as it is.

The POSTs of events are answered in front of FastAPI, by ``api/ingest.py``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from lotline.api.deps import Page, Services
from lotline.api.dto import Json
from lotline.domain.json_depth import bounded

router = APIRouter(tags=["openlineage"])


@router.get("/lineage/status")
def projection_status(lineage: Services) -> Json:
    """How far projection has got (a lotline extension; Marquez has no such endpoint)."""
    status = lineage.projection.status()
    return {"pending": status.pending, "failed": status.failed, "lastAppliedId": status.last_applied_id}


@router.get("/events/lineage")
def list_events(
    lineage: Services,
    page: Page,
    before: Annotated[datetime | None, Query()] = None,
    after: Annotated[datetime | None, Query()] = None,
    sortDirection: str = "desc",
) -> Json:
    """RunEvents only, as Marquez lists them; DatasetEvents and JobEvents stay in the journal and
    are shown by the web UI's events page."""
    found = lineage.openlineage.list_events(
        before, after, page.limit, page.offset, run_events_only=True, sort_direction=sortDirection
    )
    # Events journaled before depth was checked are shown cut, never as a failed listing.
    return {"events": [bounded(e) for e in found.items], "totalCount": found.total_count}
