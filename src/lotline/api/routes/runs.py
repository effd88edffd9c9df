"""``/jobs/runs/{id}``: a run, and its transitions through the state machine (SPEC §2)."""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter

from lotline.api.deps import Services
from lotline.api.dto import Json, run_json
from lotline.domain.runs import RunAction

router = APIRouter(prefix="/jobs/runs", tags=["runs"])


@router.get("/{run_id}")
def get_run(run_id: uuid.UUID, lineage: Services) -> Json:
    return run_json(lineage.runs.get_run(run_id))


@router.post("/{run_id}/{action}")
def transition(run_id: uuid.UUID, action: RunAction, lineage: Services, at: datetime | None = None) -> Json:
    """``start``, ``complete``, ``fail`` or ``abort`` at ``at`` (default now); 409 if illegal."""
    return run_json(lineage.runs.transition(run_id, action, at))
