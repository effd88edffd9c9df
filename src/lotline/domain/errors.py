"""Typed errors: every error an interface shows is one of these.

Each kind carries the HTTP status it is answered with (``http_status``; the REST API and the web
UI read it, the CLI exits 2 for all of them), so a new kind is added here and nowhere else. The
database's own failures reach the interfaces as ``ValueRefused``, ``ConcurrentChange``,
``DatabaseUnavailable`` or ``DatabaseError``: the store translates them, in one place
(``store/errors.py``).
"""

from __future__ import annotations

from collections.abc import Sequence


class LotlineError(Exception):
    """Base of every error lotline raises on purpose. ``code`` is a stable machine name."""

    code = "error"
    http_status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(LotlineError):
    """The caller sent something malformed (a bad name, lot id, time, or argument)."""

    code = "invalid_input"


class InvalidName(InvalidInput):
    """A name that is empty, too long, has control characters, or would escape a storage root."""

    code = "invalid_name"


class TooManyCells(InvalidInput):
    """A lot grid at the resolution asked for would hold more cells than one page draws; the web
    UI shows the coarser automatic resolution instead, with this message."""

    code = "too_many_cells"


class SchemaViolation(InvalidInput):
    """Well-formed JSON of the wrong shape: a required field missing or null, a value of the wrong
    JSON type, a value outside its enumeration (Marquez answers these 422, malformed JSON 400)."""

    code = "schema_violation"
    http_status = 422


class NotFound(LotlineError):
    """A referenced namespace, source, dataset, job or run does not exist."""

    code = "not_found"
    http_status = 404

    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"{kind} '{key}' not found.")
        self.kind = kind
        self.key = key


class Conflict(LotlineError):
    """The request contradicts the current state; ``allowed`` lists what would be accepted."""

    code = "conflict"
    http_status = 409

    def __init__(self, message: str, *, current: str | None = None, allowed: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.current = current
        self.allowed = tuple(allowed)


class ValueRefused(InvalidInput):
    """The database refused a value that lotline's own checks let through (too long for its
    column, a NUL character in JSON on PostgreSQL, a string that is not valid Unicode)."""

    code = "value_refused"


class ConcurrentChange(Conflict):
    """A concurrent change created or removed the same row first (a unique or foreign key check
    failed): trying again sees it."""

    code = "concurrent_change"


class Unavailable(LotlineError):
    """Something lotline needs is down for now (the database, or the server is shutting down):
    try again shortly."""

    code = "unavailable"
    http_status = 503


class DatabaseError(LotlineError):
    """The database failed a statement for a reason that is not the caller's input.

    ``detail`` is what the database said (one line; for logs and the CLI, not for HTTP answers),
    ``sqlstate`` its error code where it gives one (PostgreSQL), ``connection_lost`` whether the
    connection died with it (the next statement gets a new one)."""

    code = "database_error"
    http_status = 500

    def __init__(
        self, message: str, *, detail: str = "", sqlstate: str | None = None, connection_lost: bool = False
    ) -> None:
        super().__init__(message)
        self.detail = detail or message
        self.sqlstate = sqlstate
        self.connection_lost = connection_lost


class DatabaseUnavailable(DatabaseError, Unavailable):
    """The database cannot be reached, or gave up on the statement for now (a restart, a network
    cut, a lock or serialization timeout): try again shortly."""

    code = "database_unavailable"
    http_status = 503
