"""``POST /lineage`` and ``/lineage/batch`` (OpenLineage 2-0-x) as a small ASGI handler.

These two routes carry the event load, so they skip what the other routes go through (FastAPI's
and Starlette's middleware, routing, dependency injection and thread pool): the app hands them
straight to ``IngestHandler`` behind the same guards (body limit, auth, metrics; ``app.py``),
which validates the events, hands them to the process's journal writer
(``services/journal.py``, group commit) and answers once they are committed. FastAPI never
sees these requests, so their operations are added to the OpenAPI document here
(``OPERATIONS``).
"""

from __future__ import annotations

import json
import logging
import zlib
from typing import Any

import orjson
from starlette.datastructures import State
from starlette.types import Receive, Scope, Send

from lotline.api.errors import status_of
from lotline.api.guards import MAX_BODY_BYTES, BodyTooLarge, send_error, send_json
from lotline.api.metrics import Metrics
from lotline.domain.errors import InvalidInput, LotlineError
from lotline.services.journal import JournalUnavailable, JournalWriter
from lotline.services.openlineage import Batch, journal_entry

log = logging.getLogger(__name__)

EVENT_PATH = "/api/v1/lineage"
BATCH_PATH = "/api/v1/lineage/batch"
MAX_BATCH = 1000
_EVENT_BODY = {"content": {"application/json": {"schema": {"type": "object"}}}, "required": True}
_BATCH_BODY = {
    "content": {"application/json": {"schema": {"type": "array", "items": {"type": "object"}}}},
    "required": True,
}
#: The two operations in the OpenAPI document (schemathesis drives them from there).
OPERATIONS: dict[str, dict[str, Any]] = {
    EVENT_PATH: {
        "tags": ["openlineage"],
        "summary": "Post Event",
        "description": "Journaled (201) once valid and committed; the lineage model shows it after "
        "projection (see /lineage/status).",
        "operationId": "post_event_api_v1_lineage_post",
        "requestBody": _EVENT_BODY,
        "responses": {"201": {"description": "Journaled."}},
    },
    BATCH_PATH: {
        "tags": ["openlineage"],
        "summary": "Post Batch",
        "description": "Good events are journaled together (one statement); the answer lists the "
        "refused ones.",
        "operationId": "post_batch_api_v1_lineage_batch_post",
        "requestBody": _BATCH_BODY,
        "responses": {
            "200": {
                "description": "The batch summary.",
                "content": {"application/json": {"schema": {"type": "object", "additionalProperties": True}}},
            }
        },
    },
}


class _Route:
    """What the metrics middleware labels a request with (``scope["route"].path``)."""

    def __init__(self, path: str) -> None:
        self.path = path


_ROUTES = {EVENT_PATH: _Route(EVENT_PATH), BATCH_PATH: _Route(BATCH_PATH)}


def handles(scope: Scope) -> bool:
    """Whether the request is one of the two event POSTs."""
    return scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in _ROUTES


class IngestHandler:
    """Answers the two event POSTs (``handles``) with the journal writer and metrics in ``state``
    (the app's, filled in by its lifespan)."""

    def __init__(self, state: State) -> None:
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = scope["route"] = _ROUTES[scope["path"]]
        state = self.state
        try:
            body = await _json_body(scope, receive)
            if route.path == EVENT_PATH:
                await _post_event(body, state.journal, state.metrics, send)
            else:
                await _post_batch(body, state.journal, state.metrics, send)
        except LotlineError as error:
            await send_error(send, status_of(error), error.message)
        except BodyTooLarge as error:
            await send_error(send, 413, error.message)
        except JournalUnavailable as error:
            await send_error(send, 503, error.message, ((b"retry-after", b"1"),))
        except _Disconnected:
            pass
        except Exception as error:  # as errors.py does for the other routes: logged, never a bare crash
            log.exception("unexpected error")
            await send_error(send, 500, f"internal error ({type(error).__name__}).")


async def _post_event(body: Any, writer: JournalWriter, metrics: Metrics, send: Send) -> None:
    if not isinstance(body, dict):
        raise InvalidInput("the body must be one OpenLineage event (a JSON object); batches: /lineage/batch.")
    try:
        entry = journal_entry(body)
    except LotlineError:
        metrics.count_events("rejected")
        raise
    (result,) = await writer.journal([entry])
    if isinstance(result, InvalidInput):
        metrics.count_events("rejected")
        raise result
    metrics.count_events("accepted" if result else "duplicate")
    await send({"type": "http.response.start", "status": 201, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


async def _post_batch(body: Any, writer: JournalWriter, metrics: Metrics, send: Send) -> None:
    if not isinstance(body, list):
        raise InvalidInput("the body must be a JSON array of OpenLineage events.")
    if len(body) > MAX_BATCH:
        raise InvalidInput(f"a batch holds at most {MAX_BATCH} events, got {len(body)}.")
    batch = Batch.of(body)
    results = await writer.journal(batch.entries) if batch.entries else []
    accepted = batch.outcome(results)
    metrics.count_events("accepted", accepted.fresh)
    metrics.count_events("duplicate", accepted.duplicates)
    metrics.count_events("rejected", len(accepted.refused))
    failed = [{"index": index, "reason": reason, "retriable": False} for index, reason in accepted.refused]
    status = "success" if not failed else "failure" if len(failed) == len(body) else "partial_success"
    summary = {
        "received": len(body),
        "successful": len(body) - len(failed),
        "failed": len(failed),
        "retriable": 0,
        "non_retriable": len(failed),
    }
    await send_json(send, 200, {"status": status, "summary": summary, "failed_events": failed})


class _Disconnected(Exception):
    """The client went away before sending its whole body: there is no one to answer."""


async def _json_body(scope: Scope, receive: Receive) -> Any:
    """The body as JSON, gunzipped when sent with ``Content-Encoding: gzip`` (bounded, no zip bombs)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    raw = b"".join(chunks)
    encoding = next((v for k, v in scope["headers"] if k == b"content-encoding"), b"identity").decode(
        "latin-1"
    )
    encoding = encoding.lower()
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
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass  # what orjson refuses but Python's json reads (integers beyond 64 bits, NaN) stays accepted
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("the request body is not valid JSON.") from None
