"""The one place where errors become HTTP answers: ``{"code": <status>, "message": "..."}``.

Bad input must never produce a 5xx: OpenLineage clients retry those five times.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, IntegrityError, InterfaceError, OperationalError
from starlette.exceptions import HTTPException

from lotline.domain.errors import Conflict, InvalidInput, LotlineError, NotFound, SchemaViolation

log = logging.getLogger(__name__)

STATUS_OF: tuple[tuple[type[LotlineError], int], ...] = (
    (NotFound, 404),
    (Conflict, 409),
    (SchemaViolation, 422),
    (InvalidInput, 400),
)


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"code": status, "message": message}, status_code=status, headers=headers)


def status_of(error: LotlineError) -> int:
    return next((status for kind, status in STATUS_OF if isinstance(error, kind)), 400)


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
    async def _lotline(_: Request, error: LotlineError) -> JSONResponse:
        return error_response(status_of(error), error.message)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, error: RequestValidationError) -> JSONResponse:
        return error_response(*_validation_message(error))

    @app.exception_handler(HTTPException)
    async def _http(_: Request, error: HTTPException) -> JSONResponse:
        return error_response(error.status_code, str(error.detail), getattr(error, "headers", None))

    @app.exception_handler(DataError)
    async def _data(_: Request, error: DataError) -> JSONResponse:
        # The database refused a value our checks let through (too long, NUL byte): still bad input.
        return error_response(400, f"a value was rejected by the database: {str(error.orig).splitlines()[0]}")

    @app.exception_handler(UnicodeEncodeError)
    async def _not_unicode(_: Request, error: UnicodeEncodeError) -> JSONResponse:
        # JSON may escape half a surrogate pair ("\ud800"): a string no driver can store. The
        # store raises it inside the request's transaction, which rolls back.
        return error_response(
            400,
            "a string in the request is not valid Unicode (an unpaired surrogate escape such as \\ud800).",
        )

    @app.exception_handler(IntegrityError)
    async def _integrity(_: Request, error: IntegrityError) -> JSONResponse:
        return error_response(409, "the request conflicts with a concurrent change; retry it.")

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def _unavailable(_: Request, error: Exception) -> JSONResponse:
        # The database is unreachable (a restart, a network cut): the client should come back, as
        # on the event ingest path; the pool reconnects by itself once it is back.
        log.warning("database unavailable: %s", str(error).splitlines()[0][:200])
        return error_response(503, "the database is unavailable; retry shortly.", {"Retry-After": "1"})

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return error_response(500, f"internal error ({type(error).__name__}).")
