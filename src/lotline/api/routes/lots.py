"""Lot coordination (SPEC §4 and §5), a lotline extension of the Marquez paths: the data-status rows
and arc states of a job's or dataset's lots, and the operator's invalidate / hold / release."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from fastapi import APIRouter, Query

from lotline.api.deps import Page, Services
from lotline.api.dto import Json, lot_status_json
from lotline.api.routes.jobs import JOB
from lotline.domain.coordination import LotStatus, Role, Status
from lotline.domain.model import Page as ResultPage

router = APIRouter(tags=["lots"])

DATASET = "/namespaces/{namespace:seg}/datasets/{dataset:seg}"
LOT = DATASET + "/lots/{lot:seg}"


class RoleFilter(StrEnum):
    OUTPUT = "OUTPUT"
    INPUT = "INPUT"
    ALL = "ALL"


StatusQuery = Annotated[list[Status] | None, Query(alias="status", description="Repeat to allow several.")]
LotFrom = Annotated[str | None, Query(alias="from", description="Smallest lot id (inclusive).")]
LotTo = Annotated[str | None, Query(alias="to", description="Largest lot id (inclusive).")]
RoleQuery = Annotated[RoleFilter, Query(description="OUTPUT rows (one per lot), INPUT rows, or ALL.")]


def _page(found: ResultPage[LotStatus]) -> Json:
    return {"lots": [lot_status_json(r) for r in found.items], "totalCount": found.total_count}


def _role(role: RoleFilter) -> Role | None:
    return None if role is RoleFilter.ALL else Role(role.value)


@router.get(JOB + "/lots")
def job_lots(
    namespace: str,
    job: str,
    lineage: Services,
    page: Page,
    status: StatusQuery = None,
    lot_from: LotFrom = None,
    lot_to: LotTo = None,
    role: RoleQuery = RoleFilter.OUTPUT,
) -> Json:
    found = lineage.lots.status_page(
        namespace,
        job=job,
        role=_role(role),
        statuses=status or (),
        lot_from=lot_from,
        lot_to=lot_to,
        limit=page.limit,
        offset=page.offset,
    )
    return _page(found)


@router.get(DATASET + "/lots")
def dataset_lots(
    namespace: str,
    dataset: str,
    lineage: Services,
    page: Page,
    status: StatusQuery = None,
    lot_from: LotFrom = None,
    lot_to: LotTo = None,
    role: RoleQuery = RoleFilter.OUTPUT,
) -> Json:
    found = lineage.lots.status_page(
        namespace,
        dataset=dataset,
        role=_role(role),
        statuses=status or (),
        lot_from=lot_from,
        lot_to=lot_to,
        limit=page.limit,
        offset=page.offset,
    )
    return _page(found)


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
