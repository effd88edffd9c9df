"""What every route needs: the services, and paging parameters with safe bounds."""

from __future__ import annotations

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


#: How long a request waits for the projector to apply what was journaled before it.
CATCH_UP_SECONDS = 5.0
PENDING_HEADER = "X-Lineage-Pending"


async def read_your_writes(request: Request, response: Response) -> None:
    """Before a Marquez endpoint runs, project every event journaled before the request.

    When the journal is fully projected this is one look at a small partial index. Otherwise the
    request waits for the projector lock and applies the backlog up to its own arrival, for at
    most ``CATCH_UP_SECONDS``; whatever is still pending then is announced in the
    ``X-Lineage-Pending`` header rather than shown silently stale.
    """
    found: Lineage = request.app.state.lineage
    pending = await run_in_threadpool(found.projection.catch_up, CATCH_UP_SECONDS)
    if pending:
        response.headers[PENDING_HEADER] = str(pending)
