"""What every route needs: the services, and paging parameters with safe bounds."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from lotline.services import Lineage

MAX_OFFSET = 2**31 - 1


# Dependencies that do no I/O are async: FastAPI would run a plain ``def`` one in the thread pool.
async def lineage(request: Request) -> Lineage:
    found: Lineage = request.app.state.lineage
    return found


@dataclass(frozen=True)
class Paging:
    limit: int
    offset: int


async def paging(
    limit: Annotated[int, Query(ge=1, le=1000)] = 100, offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0
) -> Paging:
    return Paging(limit, offset)


Services = Annotated[Lineage, Depends(lineage)]
Page = Annotated[Paging, Depends(paging)]


#: How long a write (or a read that asks to, ``Prefer: wait=N``) waits for the events journaled
#: before it to be applied.
CATCH_UP_SECONDS = 5.0
#: The longest ``Prefer: wait=N`` honoured.
MAX_WAIT_SECONDS = 60.0
PENDING_HEADER = "X-Lineage-Pending"
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


async def read_your_writes(request: Request, response: Response) -> None:
    """Before a Marquez endpoint runs, apply what was journaled before the request, within bounds
    (docs/api.md, "Consistency"): a read never waits on a backlog (``ProjectionService.catch_up_for_read``), a
    write, and a read that sends ``Prefer: wait=N``, waits for all of it (5 s; N s, at most 60).
    Whatever is still pending is announced in the ``X-Lineage-Pending`` header rather than shown
    silently stale."""
    found: Lineage = request.app.state.lineage
    wait = prefer_wait(request.headers.get("prefer"))
    if wait is not None:
        pending = await run_in_threadpool(found.projection.catch_up, wait)
        response.headers["Preference-Applied"] = f"wait={wait:g}"
    elif request.method in _READS:
        pending = await run_in_threadpool(found.projection.catch_up_for_read)
    else:
        pending = await run_in_threadpool(found.projection.catch_up, CATCH_UP_SECONDS)
    if pending:
        response.headers[PENDING_HEADER] = str(pending)
        request.state.lineage_pending = pending  # for an error answer too (``api/errors``): a 404
        # may be a name whose events are still pending


def prefer_wait(header: str | None) -> float | None:
    """The seconds of a ``Prefer: wait=N`` header (RFC 7240), at most ``MAX_WAIT_SECONDS``; None
    without one (or with one that does not parse: a preference that cannot be honoured is ignored,
    as RFC 7240 says)."""
    for preference in (header or "").split(","):
        name, _, value = preference.strip().partition("=")
        if name.strip().lower() == "wait":
            try:
                seconds = float(value.strip().strip('"'))
            except ValueError:
                return None
            return min(max(seconds, 0.0), MAX_WAIT_SECONDS) if math.isfinite(seconds) else None
    return None
