"""A worker's common path in one call each: the PostgreSQL functions of migration 0006.

``claim_next_lot`` claims the next lot of a job without a lot mapping and starts its run;
``finish_claim`` completes or fails a claim and versions its output. Each is one statement, meant
to run in autocommit (``Store.one_statement``): its writes commit before it answers. What they
do not cover, they refuse with nothing written (:class:`FallBack`): the caller then takes the
Python path, which handles every case.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Interval, String, TextClause, Uuid, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError

from lotline.store.types import UtcDateTime


class FallBack(Exception):
    """The function does not cover this claim (e.g. an input with no current version yet)."""


class LostRace(Exception):
    """Another worker took a row of the lot between the eligibility check and the write."""


class NotLive(Exception):
    """The claim is no longer its owner's live attempt (lease ran out, reaped, failed, reopened)."""


_REFUSALS: dict[str, type[Exception]] = {"LT001": FallBack, "LT002": LostRace, "LT003": NotLive}

_CLAIM_NEXT_LOT = text(
    "SELECT claimed_lot, claimed_attempt, lease_expires_at FROM lotline_claim_next_lot("
    ":job, :stamp, :version, :output, :inputs, :owner, :run, :lease)"
).bindparams(
    bindparam("job", type_=Uuid),
    bindparam("stamp", type_=UtcDateTime),
    bindparam("version", type_=Uuid),
    bindparam("output", type_=Uuid),
    bindparam("inputs", type_=ARRAY(Uuid)),
    bindparam("owner", type_=String),
    bindparam("run", type_=Uuid),
    bindparam("lease", type_=Interval),
)

_FINISH_CLAIM = text(
    "SELECT lotline_finish_claim(:job, :run, :owner, :attempt, :success, :at, :output, :lot, :version)"
).bindparams(
    bindparam("job", type_=Uuid),
    bindparam("run", type_=Uuid),
    bindparam("owner", type_=String),
    bindparam("at", type_=UtcDateTime),
    bindparam("output", type_=Uuid),
    bindparam("lot", type_=String),
    bindparam("version", type_=Uuid),
)


@dataclass(frozen=True)
class Claimed:
    lot: str
    attempt: int
    lease_expires_at: datetime


def claim_next_lot(
    connection: Connection,
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
    eligible lot, or the job is held or its registration or current version is no longer
    ``stamp``/``version_id``."""
    params = {
        "job": job_id,
        "stamp": stamp,
        "version": version_id,
        "output": output_id,
        "inputs": list(input_ids),
        "owner": owner,
        "run": run_id,
        "lease": lease,
    }
    row = _call(connection, _CLAIM_NEXT_LOT, params)
    return None if row is None or row[0] is None else Claimed(*row)


def finish_claim(
    connection: Connection,
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
    params = {
        "job": job_id,
        "run": run_id,
        "owner": owner,
        "attempt": attempt,
        "success": success,
        "at": at,
        "output": output_id,
        "lot": lot,
        "version": version_id,
    }
    _call(connection, _FINISH_CLAIM, params)


def _call(connection: Connection, statement: TextClause, params: dict[str, object]) -> tuple[Any, ...] | None:
    """One call; a refusal raised by the function (SQLSTATE ``LT00x``) becomes its exception."""
    try:
        row = connection.execute(statement, params).first()
    except DBAPIError as error:
        refusal = _REFUSALS.get(getattr(error.orig, "sqlstate", None) or "")
        if refusal is None:
            raise
        raise refusal(str(error.orig).splitlines()[0]) from None
    return None if row is None else tuple(row)
