"""Entry points for worker processes in concurrency tests.

Each worker is a separate process (spawned, not forked) that opens its own store and connection,
waits at a barrier so that all of them hit the database at once, and reports what happened.
"""

from __future__ import annotations

import uuid
from multiprocessing.synchronize import Barrier

from lotline.domain.errors import Conflict
from lotline.domain.runs import RunAction
from lotline.services import Lineage
from lotline.store.engine import Store


def transition_run(url: str, run_id: str, action: str, barrier: Barrier) -> str:
    """Apply one transition; returns the resulting state, or ``conflict`` if it was refused."""
    lineage = Lineage.over(Store(url))
    try:
        barrier.wait(timeout=120)
        run = lineage.runs.transition(uuid.UUID(run_id), RunAction(action))
        return run.state.value
    except Conflict:
        return "conflict"
    finally:
        lineage.close()
