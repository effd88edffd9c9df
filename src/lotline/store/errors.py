"""The one translation of the database's failures into lotline's errors (``domain/errors.py``).

Every connection lotline opens reaches this module: SQLAlchemy's (``install``, its engine's
``handle_error`` event, for every statement and every connect) and the driver's own connections
(``store/drivers.py``, whose errors are first wrapped as SQLAlchemy's, so that both are
classified alike). Above the store nobody handles a driver's or SQLAlchemy's exception: a value
the database refuses is ``ValueRefused`` (400), a unique or foreign key check ``ConcurrentChange``
(409), an outage ``DatabaseUnavailable`` (503), anything else ``DatabaseError`` (500).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, event
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    PendingRollbackError,
)

from lotline.domain.errors import (
    ConcurrentChange,
    DatabaseError,
    DatabaseUnavailable,
    LotlineError,
    ValueRefused,
)

UNAVAILABLE = "the database is unavailable; retry shortly."
READ_ONLY = "the database accepts no writes now (a standby, or a failover under way); retry shortly."
#: A write on a read-only server: after a failover the old address may lead to a standby. It passes,
#: but the driver classes it as an internal error, not an operational one.
READ_ONLY_SQLSTATE = "25006"
CONCURRENT = "the request conflicts with a concurrent change; retry it."


def describe(error: BaseException) -> str:
    """What the database said, in one line: the driver's own message without SQLAlchemy's
    statement and parameters (which may be long, and hold the caller's values)."""
    original = getattr(error, "orig", None) or error
    lines = str(original).strip().splitlines()
    return (lines[0] if lines else type(original).__name__)[:300]


def translate(error: DBAPIError, *, lost: bool | None = None) -> LotlineError:
    """The lotline error for a database failure, as SQLAlchemy classified it; ``lost``: whether
    the connection is gone (default: as SQLAlchemy saw it)."""
    detail = describe(error)
    if isinstance(error, DataError):
        return ValueRefused(f"a value was rejected by the database: {detail}")
    if isinstance(error, IntegrityError):
        return ConcurrentChange(CONCURRENT)
    sqlstate = getattr(error.orig, "sqlstate", None)
    lost = bool(error.connection_invalidated) if lost is None else lost
    if lost or isinstance(error, (OperationalError, InterfaceError)):
        return DatabaseUnavailable(UNAVAILABLE, detail=detail, sqlstate=sqlstate, connection_lost=lost)
    if sqlstate == READ_ONLY_SQLSTATE:
        return DatabaseUnavailable(READ_ONLY, detail=detail, sqlstate=sqlstate)
    return DatabaseError(f"the database failed: {detail}", detail=detail, sqlstate=sqlstate)


@contextmanager
def lost_transaction() -> Iterator[None]:
    """Around a transaction: a statement on a connection that was lost earlier in it (an error
    caught, e.g. by a savepoint, and the transaction used again) is refused by SQLAlchemy before it
    reaches the database (``PendingRollbackError``, no ``handle_error``); it is the same outage."""
    try:
        yield
    except PendingRollbackError as error:
        detail = describe(error)
        raise DatabaseUnavailable(UNAVAILABLE, detail=detail, connection_lost=True) from error


def install(engine: Engine) -> None:
    """Raise lotline's errors from every statement and connect of ``engine``. SQLAlchemy still
    does its own handling first (a lost connection is invalidated and the pool renewed)."""

    @event.listens_for(engine, "handle_error")
    def _translate(context: ExceptionContext) -> LotlineError | None:
        error = context.sqlalchemy_exception
        if isinstance(context.original_exception, LotlineError):
            return context.original_exception  # the driver's own refusal (drivers.NUL_REFUSED), as it is
        if isinstance(error, DBAPIError):
            # No connection at all (connecting failed: the server is down or restarting) is lost too.
            return translate(error, lost=context.is_disconnect or context.connection is None)
        if isinstance(context.original_exception, UnicodeEncodeError):
            # JSON may escape half a surrogate pair ("\ud800"): a string no driver can encode.
            return ValueRefused(
                "a string in the request is not valid Unicode (an unpaired surrogate escape such as \\ud800)."
            )
        return None
