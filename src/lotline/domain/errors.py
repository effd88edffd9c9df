"""Typed errors of the lineage core.

Every layer above maps these to its own surface (HTTP status, CLI exit code) in one place,
so a new error kind only has to be added here and in those two mappings.
"""

from __future__ import annotations

from collections.abc import Sequence


class LotlineError(Exception):
    """Base of every error lotline raises on purpose. ``code`` is a stable machine name."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(LotlineError):
    """The caller sent something malformed (a bad name, lot id, time, or argument)."""

    code = "invalid_input"


class InvalidName(InvalidInput):
    """A name that is empty, too long, has control characters, or would escape a storage root."""

    code = "invalid_name"


class SchemaViolation(InvalidInput):
    """Well-formed JSON of the wrong shape: a required field missing or null, a value of the wrong
    JSON type, a value outside its enumeration (Marquez answers these 422, malformed JSON 400)."""

    code = "schema_violation"


class NotFound(LotlineError):
    """A referenced namespace, source, dataset, job or run does not exist."""

    code = "not_found"

    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"{kind} '{key}' not found.")
        self.kind = kind
        self.key = key


class Conflict(LotlineError):
    """The request contradicts the current state; ``allowed`` lists what would be accepted."""

    code = "conflict"

    def __init__(self, message: str, *, current: str | None = None, allowed: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.current = current
        self.allowed = tuple(allowed)
