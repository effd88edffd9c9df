"""``POST /lineage`` and ``/lineage/batch`` (OpenLineage 2-0-x), and ``GET /events/lineage``."""

from __future__ import annotations

import json
import zlib
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from sqlalchemy.exc import DBAPIError
from starlette.concurrency import run_in_threadpool

from lotline.api.deps import Page, Services, metrics
from lotline.api.dto import Json
from lotline.api.guards import MAX_BODY_BYTES, BodyTooLarge
from lotline.domain.errors import InvalidInput, LotlineError
from lotline.services import Lineage

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
    event = await _json_body(request)
    if not isinstance(event, dict):
        raise InvalidInput("the body must be one OpenLineage event (a JSON object); batches: /lineage/batch.")
    try:
        fresh = await run_in_threadpool(lineage.openlineage.ingest, event)
    except LotlineError:
        metrics(request).count_events("rejected")
        raise
    metrics(request).count_events("applied" if fresh else "duplicate")
    return Response(status_code=201)


@router.post("/lineage/batch", openapi_extra={"requestBody": _BATCH_BODY})
async def post_batch(request: Request, lineage: Services) -> Json:
    """Each event is its own transaction; the answer says which ones failed and whether to retry."""
    events = await _json_body(request)
    if not isinstance(events, list):
        raise InvalidInput("the body must be a JSON array of OpenLineage events.")
    if len(events) > MAX_BATCH:
        raise InvalidInput(f"a batch holds at most {MAX_BATCH} events, got {len(events)}.")
    return await run_in_threadpool(_ingest_all, lineage, events, request)


def _ingest_all(lineage: Lineage, events: list[Any], request: Request) -> Json:
    failed: list[Json] = []
    for index, event in enumerate(events):
        try:
            if not isinstance(event, dict):
                raise InvalidInput("an event must be a JSON object.")
            fresh = lineage.openlineage.ingest(event)
            metrics(request).count_events("applied" if fresh else "duplicate")
        except LotlineError as error:
            failed.append({"index": index, "reason": error.message, "retriable": False})
        except DBAPIError as error:
            # A dropped connection or a deadlock: nothing was written, the client may retry.
            failed.append({"index": index, "reason": str(error.orig).splitlines()[0], "retriable": True})
    metrics(request).count_events("rejected", len(failed))
    retriable = sum(1 for f in failed if f["retriable"])
    status = "success" if not failed else "failure" if len(failed) == len(events) else "partial_success"
    return {
        "status": status,
        "summary": {
            "received": len(events),
            "successful": len(events) - len(failed),
            "failed": len(failed),
            "retriable": retriable,
            "non_retriable": len(failed) - retriable,
        },
        "failed_events": failed,
    }


@router.get("/events/lineage")
def list_events(
    lineage: Services,
    page: Page,
    before: Annotated[datetime | None, Query()] = None,
    after: Annotated[datetime | None, Query()] = None,
) -> Json:
    found = lineage.openlineage.list_events(before, after, page.limit, page.offset)
    return {"events": list(found.items), "totalCount": found.total_count}
