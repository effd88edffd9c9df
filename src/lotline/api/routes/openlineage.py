"""``POST /lineage`` and ``/lineage/batch`` (OpenLineage 2-0-x), ``GET /lineage/status`` and
``GET /events/lineage``.

A POST validates its events and journals them in one statement, then answers; the projector
applies them afterwards (``services/projection.py``), woken here.
"""

from __future__ import annotations

import json
import zlib
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from lotline.api.deps import Page, Services, metrics, wake_projector
from lotline.api.dto import Json
from lotline.api.guards import MAX_BODY_BYTES, BodyTooLarge
from lotline.domain.errors import InvalidInput, LotlineError

router = APIRouter(tags=["openlineage"])
MAX_BATCH = 1000
_EVENT_BODY = {"content": {"application/json": {"schema": {"type": "object"}}}, "required": True}
_BATCH_BODY = {
    "content": {"application/json": {"schema": {"type": "array", "items": {"type": "object"}}}},
    "required": True,
}


async def _json_body(request: Request) -> Any:
    """The body as JSON, gunzipped when sent with ``Content-Encoding: gzip`` (bounded, no zip bombs)."""
    raw = await request.body()
    encoding = request.headers.get("content-encoding", "identity").lower()
    if encoding == "gzip":
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            raw = inflater.decompress(raw, MAX_BODY_BYTES + 1)
        except zlib.error:
            raise InvalidInput("the body is not valid gzip.") from None
        if len(raw) > MAX_BODY_BYTES or inflater.unconsumed_tail:
            raise BodyTooLarge()
    elif encoding != "identity":
        raise InvalidInput(f"Content-Encoding {encoding[:40]!r} is not supported; use gzip or none.")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("the request body is not valid JSON.") from None


@router.post("/lineage", status_code=201, openapi_extra={"requestBody": _EVENT_BODY})
async def post_event(request: Request, lineage: Services) -> Response:
    """Journaled (201) once valid; the lineage model shows it after projection (see /lineage/status)."""
    event = await _json_body(request)
    if not isinstance(event, dict):
        raise InvalidInput("the body must be one OpenLineage event (a JSON object); batches: /lineage/batch.")
    try:
        fresh = await run_in_threadpool(lineage.openlineage.accept, event)
    except LotlineError:
        metrics(request).count_events("rejected")
        raise
    metrics(request).count_events("accepted" if fresh else "duplicate")
    if fresh:
        wake_projector(request)
    return Response(status_code=201)


@router.post("/lineage/batch", openapi_extra={"requestBody": _BATCH_BODY})
async def post_batch(request: Request, lineage: Services) -> Json:
    """Good events are journaled together (one statement); the answer lists the refused ones."""
    events = await _json_body(request)
    if not isinstance(events, list):
        raise InvalidInput("the body must be a JSON array of OpenLineage events.")
    if len(events) > MAX_BATCH:
        raise InvalidInput(f"a batch holds at most {MAX_BATCH} events, got {len(events)}.")
    accepted = await run_in_threadpool(lineage.openlineage.accept_batch, events)
    counter = metrics(request)
    counter.count_events("accepted", accepted.fresh)
    counter.count_events("duplicate", accepted.duplicates)
    counter.count_events("rejected", len(accepted.refused))
    if accepted.fresh:
        wake_projector(request)
    failed = [{"index": index, "reason": reason, "retriable": False} for index, reason in accepted.refused]
    status = "success" if not failed else "failure" if len(failed) == len(events) else "partial_success"
    return {
        "status": status,
        "summary": {
            "received": len(events),
            "successful": len(events) - len(failed),
            "failed": len(failed),
            "retriable": 0,
            "non_retriable": len(failed),
        },
        "failed_events": failed,
    }


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
) -> Json:
    found = lineage.openlineage.list_events(before, after, page.limit, page.offset)
    return {"events": list(found.items), "totalCount": found.total_count}
