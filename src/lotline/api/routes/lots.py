"""Lot coordination (SPEC §4 and §5), a lotline extension of the Marquez paths: the data-status rows
and arc states of a job's or dataset's lots, and the operator's invalidate / hold / release."""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool

from lotline.api.deps import Page, Paging, Services
from lotline.api.dto import Json, lot_status_json
from lotline.api.event_waits import LotEventWatch, wait_for_move
from lotline.api.routes.jobs import JOB
from lotline.domain.coordination import Role, Status
from lotline.domain.manifests import LotEvent
from lotline.services import Lineage

router = APIRouter(tags=["lots"])

DATASET = "/namespaces/{namespace:seg}/datasets/{dataset:seg}"
LOT = DATASET + "/lots/{lot:seg}"


class RoleFilter(StrEnum):
    OUTPUT = "OUTPUT"
    INPUT = "INPUT"
    ALL = "ALL"


@dataclass(frozen=True)
class LotFilters:
    statuses: tuple[Status, ...]
    lot_from: str | None
    lot_to: str | None
    role: Role | None


def lot_filters(
    status: Annotated[list[Status] | None, Query(description="Repeat to allow several.")] = None,
    lot_from: Annotated[str | None, Query(alias="from", description="Smallest lot id (inclusive).")] = None,
    lot_to: Annotated[str | None, Query(alias="to", description="Largest lot id (inclusive).")] = None,
    role: Annotated[
        RoleFilter, Query(description="OUTPUT rows (one per lot), INPUT, or ALL.")
    ] = RoleFilter.OUTPUT,
) -> LotFilters:
    return LotFilters(
        tuple(status or ()), lot_from, lot_to, None if role is RoleFilter.ALL else Role(role.value)
    )


Filters = Annotated[LotFilters, Depends(lot_filters)]


def _page(lineage: Lineage, namespace: str, page: Paging, filters: LotFilters, **owner: str) -> Json:
    found = lineage.lots.status_page(
        namespace,
        role=filters.role,
        statuses=filters.statuses,
        lot_from=filters.lot_from,
        lot_to=filters.lot_to,
        limit=page.limit,
        offset=page.offset,
        **owner,
    )
    return {"lots": [lot_status_json(r) for r in found.items], "totalCount": found.total_count}


@router.get(JOB + "/lots")
def job_lots(namespace: str, job: str, lineage: Services, page: Page, filters: Filters) -> Json:
    return _page(lineage, namespace, page, filters, job=job)


@router.get(DATASET + "/lots")
def dataset_lots(namespace: str, dataset: str, lineage: Services, page: Page, filters: Filters) -> Json:
    return _page(lineage, namespace, page, filters, dataset=dataset)


@router.post(LOT + "/invalidate")
def invalidate(namespace: str, dataset: str, lot: str, lineage: Services) -> Json:
    """Reopen the lot (RESUBMIT) and, transitively, every lot computed from it."""
    reopened = lineage.lots.invalidate(namespace, dataset, lot)
    return {"reopened": [{"namespace": r.namespace, "name": r.name, "lot": lot} for r in reopened]}


@router.post(LOT + "/hold")
def hold_lot(namespace: str, dataset: str, lot: str, lineage: Services) -> Json:
    changed = lineage.lots.hold_lot(namespace, dataset, lot)
    return {"held": True, "changed": changed}


@router.post(LOT + "/release")
def release_lot(namespace: str, dataset: str, lot: str, lineage: Services) -> Json:
    restored = lineage.lots.release_lot(namespace, dataset, lot)
    return {"held": False, "status": restored.value if restored else None}


@router.post(JOB + "/hold")
def hold_job(namespace: str, job: str, lineage: Services) -> Json:
    return {"held": True, "changed": lineage.lots.hold_job(namespace, job)}


@router.post(JOB + "/release")
def release_job(namespace: str, job: str, lineage: Services) -> Json:
    lineage.lots.release_job(namespace, job)
    return {"held": False}


@router.post(JOB + "/retry")
def retry_job(
    namespace: str,
    job: str,
    lineage: Services,
    lot: Annotated[list[str] | None, Query(description="Only these lots; repeat for several.")] = None,
) -> Json:
    """The operator's retry (`lotline retry`): the job's failed lots, given up on or backing off,
    due at once with their count of failures back to 0."""
    return {"retried": lineage.lots.retry(namespace, job, lot)}


#: The longest a request for lot events may wait for the first one to arrive.
MAX_EVENT_WAIT_S = 30.0
#: Positions are 64-bit.
MAX_POSITION = 2**63 - 1


@router.get("/lots/events")
async def lot_events(
    request: Request,
    lineage: Services,
    after: Annotated[
        int, Query(ge=0, le=MAX_POSITION, description="Events after this position (0: from the start).")
    ] = 0,
    namespace: Annotated[str | None, Query(description="Namespace of the datasets filter.")] = None,
    dataset: Annotated[list[str] | None, Query(description="Only these datasets (repeatable).")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    wait: Annotated[
        float, Query(ge=0, le=MAX_EVENT_WAIT_S, description="Seconds to wait for an event if none is there.")
    ] = 0,
) -> Json:
    """The lot availability log (SPEC §5) from a position: READY, REOPENED and FAILED events in
    commit order. ``lastPosition`` is where the next request should start (``after``). A request
    that waits holds no thread (``api/event_waits.py``); beyond the server's cap of waiters it is a 429."""
    deadline = time.monotonic() + wait

    def read() -> list[LotEvent]:
        return lineage.lot_events.after(after, namespace=namespace, datasets=dataset or (), limit=limit)

    found = await run_in_threadpool(read)
    if not found and wait > 0:
        watch: LotEventWatch = request.app.state.lot_event_watch
        async with watch.waiting():
            while True:  # the move to wait for is taken before each read: none is missed
                moved = watch.moved()
                found = await run_in_threadpool(read)
                if found or (remaining := deadline - time.monotonic()) <= 0:
                    break
                await wait_for_move(moved, remaining)
    last = found[-1].position if found else after
    return {"events": [e.to_json() for e in found], "lastPosition": last}
