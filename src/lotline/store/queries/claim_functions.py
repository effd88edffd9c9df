"""A worker's common path in one call each: the PostgreSQL functions of migrations 0006 to 0016.

``claim_next_lot`` claims the next lot of a job without a lot mapping and starts its run;
``finish_claim`` completes or fails a claim and versions its output. Each is one statement in
autocommit, sent on the driver's own connection (``drivers.DirectConnections``, which also says
why): its writes commit before it answers. What they
do not cover, they refuse with nothing written (:class:`FallBack`): the caller then takes the
Python path, which handles every case.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from lotline.domain.errors import DatabaseError
from lotline.store.drivers import DirectConnections


class FallBack(Exception):
    """The function does not cover this claim (e.g. an input with no current version yet)."""


class LostRace(Exception):
    """Another worker took a row of the lot between the eligibility check and the write."""


class NotLive(Exception):
    """The claim is no longer its owner's live attempt (lease ran out, reaped, failed, reopened)."""


#: 55P03 (lock_not_available): a row of the lot is being changed; the claim does not wait (migration 0022).
_REFUSALS: dict[str, type[Exception]] = {
    "LT001": FallBack,
    "LT002": LostRace,
    "LT003": NotLive,
    "55P03": LostRace,
}

# psycopg's own placeholders; it prepares each statement on the server after a few calls. The
# arguments go as text, which the server casts to the function's parameter types: adapting UUIDs,
# a list and a timedelta cost the worker ~40 µs of CPU per call, a third of the call.
_CLAIM_NEXT_LOT = (
    "SELECT claimed_lot, claimed_attempt, lease_expires_at, claimed_failures "
    "FROM lotline_claim_next_lot(%s, %s, %s, %s, %s, %s, %s, %s)"
)
_FINISH_CLAIM = "SELECT lotline_finish_claim(%s, %s, %s, %s, %s, %s, %s, %s, %s)"


@dataclass(frozen=True)
class Claimed:
    lot: str
    attempt: int
    lease_expires_at: datetime
    #: Failures in a row of the lot that this claim retries (its retry hint's count).
    failures: int


def claim_next_lot(
    connections: DirectConnections,
    *,
    job_id: uuid.UUID,
    stamp: datetime,
    version_id: uuid.UUID | None,
    output_id: uuid.UUID,
    input_ids: Sequence[uuid.UUID],
    owner: str,
    run_id: uuid.UUID,
    lease: timedelta,
) -> Claimed | None:
    """The claimed lot, its run started (by the database's clock), or None: no hint led to an
    eligible lot, or the job is held or its lot job's stamp or current version is no longer
    ``stamp``/``version_id``."""
    params = (
        str(job_id),
        stamp.isoformat(),
        _text(version_id),
        str(output_id),
        "{" + ",".join(str(i) for i in input_ids) + "}",
        owner,
        str(run_id),
        f"{lease.total_seconds()} seconds",
    )
    row = _call(connections, _CLAIM_NEXT_LOT, params)
    if row is None or row[0] is None:
        return None
    lot, attempt, lease_expires_at, failures = row
    return Claimed(lot, attempt, lease_expires_at.astimezone(UTC), failures)


def finish_claim(
    connections: DirectConnections,
    *,
    job_id: uuid.UUID,
    run_id: uuid.UUID,
    owner: str,
    attempt: int,
    success: bool,
    at: datetime | None,
    output_id: uuid.UUID,
    lot: str,
    version_id: uuid.UUID,
) -> None:
    """End the claim (fenced) and its run at ``at`` (None: now, by the database's clock); its
    output's new version gets ``version_id``."""
    params = (
        str(job_id),
        str(run_id),
        owner,
        attempt,
        success,
        None if at is None else at.isoformat(),
        str(output_id),
        lot,
        str(version_id),
    )
    _call(connections, _FINISH_CLAIM, params)


def _text(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)


def _call(connections: DirectConnections, statement: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """One call; a refusal raised by the function (SQLSTATE ``LT00x``) becomes its exception."""
    try:
        return connections.fetch_one(statement, params)
    except DatabaseError as error:
        refusal = _REFUSALS.get(error.sqlstate or "")
        if refusal is None:
            raise
        raise refusal(error.detail) from None
