"""Worker processes that fail overlapping lots over and over
(``support.processes.separate_processes``), for the work-list deadlock test (issue 39.19).

Each opens its own store, as a worker on another machine would, and writes to ``out/NAME.json``
how many lots it failed and the database errors it met (a deadlock above all), with their text.
Its claims are of all three kinds: a named lot (the Python path), the Python path's search (by a
clock of the worker's own, advanced past the back-off so that its retry hints are due) and the
PostgreSQL claim function; each claim is failed at once, which hints the lot to its job again.
"""

from __future__ import annotations

import contextlib
import json
import random
from datetime import timedelta
from pathlib import Path

from lotline.domain.clock import ManualClock
from lotline.domain.errors import Conflict, DatabaseError, InvalidInput, NotFound
from lotline.services import Lineage
from lotline.store.engine import Store

REFUSED = (Conflict, InvalidInput, NotFound)
KINDS = ["named", "named", "search", "next"]


def fail_lots(url: str, namespace: str, lots: list[str], seed: int, steps: int, out: str) -> None:
    """``steps`` claims of the ``clean`` job, each failed at once, on random lots of ``lots``; a
    database error is counted and the worker goes on (its transaction rolled back)."""
    pick = random.Random(seed)
    clock = ManualClock()
    store = Store(url)
    lineage = Lineage.over(store)
    timed = Lineage.over(store, clock=clock)
    stats: dict[str, int] = {"failed": 0, "db_errors": 0}
    errors: list[str] = []
    try:
        for _ in range(steps):
            kind = pick.choice(KINDS)
            service = timed.lots if kind == "search" else lineage.lots
            named = pick.choice(lots) if kind == "named" else None
            try:
                with contextlib.suppress(*REFUSED):
                    claim = service.claim(f"w{seed}-{pick.randrange(1000)}", namespace, "clean", lot=named)
                    if claim is not None:
                        service.fail(claim, error="ValueError: bad line")
                        stats["failed"] += 1
            except DatabaseError as error:
                stats["db_errors"] += 1
                errors.append(f"{kind}: {error} / {error.__cause__}")
            clock.advance(timedelta(minutes=30))  # the search's retry hints are due again
    finally:
        lineage.close()
    Path(out, f"worker{seed}.json").write_text(json.dumps({**stats, "errors": errors[:5]}))
