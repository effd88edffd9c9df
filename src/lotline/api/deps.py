"""What every route needs: the services, and paging parameters with safe bounds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request

from lotline.api.metrics import Metrics
from lotline.services import Lineage

MAX_OFFSET = 2**31 - 1


def lineage(request: Request) -> Lineage:
    found: Lineage = request.app.state.lineage
    return found


def metrics(request: Request) -> Metrics:
    found: Metrics = request.app.state.metrics
    return found


@dataclass(frozen=True)
class Paging:
    limit: int
    offset: int


def paging(
    limit: Annotated[int, Query(ge=1, le=1000)] = 100, offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0
) -> Paging:
    return Paging(limit, offset)


Services = Annotated[Lineage, Depends(lineage)]
Page = Annotated[Paging, Depends(paging)]
