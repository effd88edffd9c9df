"""Entry points for worker processes in concurrency tests.

Each worker is a separate process (``support.processes.separate_processes``: forked from a clean
fork server, never from the test process) that opens its own store and connection, waits at a
barrier so that all of them hit the database at once, and reports what happened.
"""

from __future__ import annotations

import os
import uuid
from datetime import datetime
from multiprocessing.synchronize import Barrier

from lotline.domain.clock import ManualClock
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


def drain_journal(url: str, group_size: int, barrier: Barrier) -> list[int]:
    """Project the journal one small group at a time, waiting for the lock each time, and pausing
    between groups so that the other processes get the lock too; the ids it applied."""
    import time

    from lotline.services.projection import ProjectionService

    store = Store(url)
    try:
        projection = ProjectionService(store, group_size=group_size)
        barrier.wait(timeout=120)
        done: list[int] = []
        while True:
            drained = projection.drain(wait=True, max_events=group_size)
            assert not drained.stalled
            if not (drained.applied or drained.failed) and not projection.backlog():
                return done
            done += [*drained.applied, *drained.failed]
            time.sleep(0.01)
    finally:
        store.dispose()


def post_events(server_url: str, db_url: str, token: str, bodies: list[bytes], barrier: Barrier) -> list[int]:
    """POST each body to ``/lineage`` on a connection of its own; after every 201 the event must
    already be committed (seen from this process's own database connection). The statuses."""
    import hashlib
    import json

    import requests
    from sqlalchemy import select

    from lotline.domain.openlineage import event_key
    from lotline.store.schema import lineage_events

    store = Store(db_url)
    statuses: list[int] = []
    try:
        with requests.Session() as session:
            session.headers.update({"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            barrier.wait(timeout=120)
            for body in bodies:
                answer = session.post(f"{server_url}/api/v1/lineage", data=body, timeout=60)
                statuses.append(answer.status_code)
                if answer.status_code == 201:
                    key = event_key(json.loads(body))
                    with store.read() as connection:
                        found = connection.execute(
                            select(lineage_events.c.id).where(lineage_events.c.event_key == key)
                        ).all()
                    assert len(found) == 1, hashlib.sha256(body).hexdigest()
    finally:
        store.dispose()
    return statuses


def fail_every_claim(url: str, namespace: str, job: str, at: str, tries: int, barrier: Barrier) -> int:
    """A worker whose every lot fails: ``tries`` claims of ``job`` on a clock stopped at ``at``
    (so a back-off never runs out meanwhile, however slow the machine); how many lots it failed."""
    lineage = Lineage.over(Store(url), clock=ManualClock(datetime.fromisoformat(at)))
    failed = 0
    try:
        barrier.wait(timeout=120)
        for _ in range(tries):
            claim = lineage.lots.claim(f"worker-{os.getpid()}", namespace, job)
            if claim is not None:
                lineage.lots.fail(claim, error="[MALFORMED_RECORD_IN_PARSING] bad.csv")
                failed += 1
        return failed
    finally:
        lineage.close()
