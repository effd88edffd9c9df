"""Arrival passes in a process of their own (``support.processes.separate_processes``), for the
tests that run several at once against one database."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from lotline.domain.clock import ManualClock
from lotline.services import Lineage
from lotline.store.engine import Store


def passes(url: str, at: str, rounds: int, out: str) -> None:
    """``rounds`` arrival passes at the instant ``at``; writes the OVERDUE lots this process pushed."""
    lineage = Lineage.over(Store(url), clock=ManualClock(datetime.datetime.fromisoformat(at)))
    pushed = []
    try:
        for _ in range(rounds):
            pushed += [f"{dataset} {lot}" for _, dataset, lot in lineage.arrival_pass.notice().overdue]
    finally:
        lineage.close()
    Path(out).write_text(json.dumps(pushed))
