"""The one place where errors become HTTP answers: ``{"code": <status>, "message": "..."}``.

Bad input must never produce a 5xx: OpenLineage clients retry those five times.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from lotline.domain.errors import (
    DatabaseError,
    DatabaseUnavailable,
    LotlineError,
    TooManyRequests,
    Unavailable,
)

log = logging.getLogger(__name__)
#: What an answer of 503 asks the client to wait before it tries again.
RETRY_AFTER = {"Retry-After": "1"}


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"code": status, "message": message}, status_code=status, headers=headers)


def lotline_error_response(error: LotlineError) -> JSONResponse:
    """A lotline error as its answer; an outage asks the client to come back (the pool reconnects
    by itself once the database is back) as does a 429, a database failure is logged with what it said."""
    if isinstance(error, DatabaseUnavailable):  # the projector says the outage once (issue 39.16)
        log.debug("database unavailable: %s", error.detail)
    elif isinstance(error, DatabaseError):
        log.warning("database error: %s", error.detail)
    headers = RETRY_AFTER if isinstance(error, Unavailable | TooManyRequests) else None
    return error_response(error.http_status, error.message, headers)


def _validation_message(error: RequestValidationError) -> tuple[int, str]:
    """Malformed JSON is 400 (SPEC §9); well-formed JSON of the wrong shape is 422."""
    problems = error.errors()
    if any(p.get("type") == "json_invalid" for p in problems):
        return 400, "the request body is not valid JSON."
    parts = []
    for p in problems[:5]:
        where = ".".join(str(x) for x in p.get("loc", ()) if x != "body") or "body"
        parts.append(f"{where}: {p.get('msg', 'invalid')}")
    return 422, "; ".join(parts) or "invalid request."


def install(app: FastAPI) -> None:
    @app.exception_handler(LotlineError)
    async def _lotline(request: Request, error: LotlineError) -> JSONResponse:
        answer = lotline_error_response(error)
        pending = getattr(request.state, "lineage_pending", None)
        if pending:  # what ``deps.read_your_writes`` found still pending: this may be why
            answer.headers["X-Lineage-Pending"] = str(pending)
        return answer

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, error: RequestValidationError) -> JSONResponse:
        return error_response(*_validation_message(error))

    @app.exception_handler(HTTPException)
    async def _http(_: Request, error: HTTPException) -> JSONResponse:
        return error_response(error.status_code, str(error.detail), getattr(error, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return error_response(500, f"internal error ({type(error).__name__}).")
