"""``POST /lineage`` and ``/lineage/batch`` (OpenLineage 2-0-x) as a small ASGI handler.

These two routes carry the event load, so they skip what the other routes go through (FastAPI's
and Starlette's middleware, routing, dependency injection and thread pool): the app hands them
straight to ``IngestHandler``, which applies the same guards (body limit, auth) and metrics itself,
validates the events, hands them to the process's journal writer
(``server/journal.py``, group commit) and answers once they are committed. FastAPI never
sees these requests, so their operations are added to the OpenAPI document here
(``OPERATIONS``).
"""

from __future__ import annotations

import json
import logging
import math
import time
import zlib
from typing import Any, NamedTuple

import orjson
from starlette.datastructures import State
from starlette.types import Receive, Scope, Send

from lotline.api.guards import BodyTooLarge, Guard, Headers, send_json
from lotline.api.metrics import Metrics
from lotline.domain.errors import DatabaseError, DatabaseUnavailable, InvalidInput, LotlineError, Unavailable
from lotline.domain.json_depth import MAX_JSON_DEPTH
from lotline.server.journal import JournalWriter
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
#: The answer of a batch: the OpenLineage spec's (``OpenLineage.yml``, ``postEventBatch``, 200).
BATCH_SUMMARY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["success", "partial_success"]},
        "summary": {
            "type": "object",
            "properties": {
                name: {"type": "integer"}
                for name in ("received", "successful", "failed", "retriable", "non_retriable")
            },
            "required": ["received", "successful", "failed"],
        },
        "failed_events": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "index": {"type": "integer"},
                    "reason": {"type": "string"},
                    "retriable": {"type": "boolean"},
                },
            },
        },
    },
    "required": ["status", "summary"],
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
        "responses": {
            "201": {"description": "Journaled."},
            "400": {"description": "Malformed JSON, or a value that cannot be read or stored."},
            "422": {"description": "Well-formed JSON that breaks the OpenLineage schema."},
        },
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
                "description": "The batch summary, in the OpenLineage spec's shape.",
                "content": {"application/json": {"schema": BATCH_SUMMARY}},
            }
        },
    },
}


_PATHS = frozenset({EVENT_PATH, BATCH_PATH})


def handles(scope: Scope) -> bool:
    """Whether the request is one of the two event POSTs."""
    return scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in _PATHS


class _Answer(NamedTuple):
    status: int
    document: object = None  # sent as JSON; None: an empty body
    headers: Headers = ()


_JOURNALED = _Answer(201)


class IngestHandler:
    """Answers the two event POSTs (``handles``) with the journal writer and metrics in ``state``
    (the app's, filled in by its lifespan), behind ``guard``.

    It does itself what the other routes' middleware does (``guards.GuardMiddleware``,
    ``metrics.MetricsMiddleware``): each layer of ASGI wrappers cost the server about 4 us per
    event, 7% of its CPU per single event in all (docs/benchmarks.md)."""

    def __init__(self, state: State, guard: Guard) -> None:
        self.state = state
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self.guard.refusal(scope)
        if refusal is not None:  # not counted by the metrics, as for the other routes
            await refusal.send(send)
            return
        started = time.perf_counter()
        try:
            answer = await self._answer(scope, receive)
        except _Disconnected:
            return  # no one to answer
        if answer.document is None:
            headers = [(b"content-length", b"0"), *answer.headers]
            await send({"type": "http.response.start", "status": answer.status, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
        else:
            await send_json(send, answer.status, answer.document, answer.headers)
        path = scope["path"]
        self.state.metrics.observe("POST", path, answer.status, time.perf_counter() - started)

    async def _answer(self, scope: Scope, receive: Receive) -> _Answer:
        state = self.state
        try:
            body = await _json_body(scope, receive, self.guard.limit)
            if scope["path"] == EVENT_PATH:
                await _post_event(body, state.journal, state.metrics)
                return _JOURNALED
            return _Answer(200, await _post_batch(body, state.journal, state.metrics))
        except LotlineError as error:  # as errors.lotline_error_response answers the other routes
            if isinstance(error, DatabaseUnavailable):  # said once, by the projector (issue 39.16)
                log.debug("database unavailable: %s", error.detail)
            elif isinstance(error, DatabaseError):
                log.warning("database error: %s", error.detail)
            retry = ((b"retry-after", b"1"),) if isinstance(error, Unavailable) else ()
            return _error(error.http_status, error.message, retry)
        except _Disconnected:
            raise
        except Exception as error:  # as errors.py does for the other routes: logged, never a bare crash
            log.exception("unexpected error")
            return _error(500, f"internal error ({type(error).__name__}).")


def _error(status: int, message: str, headers: Headers = ()) -> _Answer:
    return _Answer(status, {"code": status, "message": message}, headers)


async def _post_event(body: Any, writer: JournalWriter, metrics: Metrics) -> None:
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


async def _post_batch(body: Any, writer: JournalWriter, metrics: Metrics) -> dict[str, Any]:
    """The batch summary of the OpenLineage spec (partial success)."""
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
    # The spec's two statuses: partial_success also when every event failed (docs/api.md).
    status = "partial_success" if failed else "success"
    summary = {
        "received": len(body),
        "successful": len(body) - len(failed),
        "failed": len(failed),
        "retriable": 0,
        "non_retriable": len(failed),
    }
    return {"status": status, "summary": summary, "failed_events": failed}


class _Disconnected(Exception):
    """The client went away before sending its whole body: there is no one to answer."""


async def _json_body(scope: Scope, receive: Receive, limit: int) -> Any:
    """The body as JSON, gunzipped when sent with ``Content-Encoding: gzip``; at most ``limit``
    bytes, as sent and as inflated (no zip bombs)."""
    chunks, received = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected()
        chunk = message.get("body", b"")
        received += len(chunk)
        if received > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    encoding = b"identity"
    for name, value in scope["headers"]:
        if name == b"content-encoding":
            encoding = value
    encoding_name = encoding.decode("latin-1").lower()
    if encoding_name == "gzip":
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            raw = inflater.decompress(raw, limit + 1)
        except zlib.error:
            raise InvalidInput("the body is not valid gzip.") from None
        if len(raw) > limit or inflater.unconsumed_tail:
            raise BodyTooLarge(limit)
    elif encoding_name != "identity":
        raise InvalidInput(f"Content-Encoding {encoding_name[:40]!r} is not supported; use gzip or none.")
    return _decode_json(raw)


def _not_a_number(text: str) -> float:
    """NaN and the infinities are not JSON; no database stores them the same way: refused."""
    raise InvalidInput(f"the request body holds {text}, which is not a JSON number.")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400
        raise InvalidInput(f"the number {text[:40]} in the request body is out of range.")
    return value


def _decode_json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass  # what orjson refuses but Python's json reads (integers beyond 64 bits) stays accepted
    try:
        return json.loads(raw, parse_constant=_not_a_number, parse_float=_finite)
    except RecursionError:
        raise InvalidInput(f"the request body nests JSON deeper than {MAX_JSON_DEPTH} levels.") from None
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("the request body is not valid JSON.") from None
