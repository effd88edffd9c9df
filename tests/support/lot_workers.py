"""Worker processes for the multi-process acceptance test (``support.processes.separate_processes``).

Each process opens its own store, as a worker on another machine would. Workers know nothing of
each other: they claim, "work", complete or fail at random, reap expired claims, and carry on
through database outages (a PostgreSQL restart) by retrying.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from lotline.domain.coordination import LotClaim, Status
from lotline.domain.errors import ConcurrentChange, Conflict, DatabaseError
from lotline.services import Lineage
from lotline.store.engine import Store

#: Failures in a row a lot may have before the workers give up on it: in effect, never.
UNTIL_DONE = 1_000_000
DEADLINE_S = 900
REAP_EVERY_S = 0.5
OUTAGE_PAUSE_S = 0.3


def claim_to_json(claim: LotClaim) -> str:
    return json.dumps(asdict(claim), default=str)


def claim_from_json(text: str) -> LotClaim:
    data: dict[str, Any] = json.loads(text)
    data["input_lots"] = tuple(tuple(pair) for pair in data["input_lots"])
    for key in ("job_id", "dataset_id", "run_id"):
        data[key] = UUID(data[key])
    data["lease_expires_at"] = datetime.fromisoformat(data["lease_expires_at"])
    return LotClaim(**data)


def _retrying(action: Any, stats: dict[str, int]) -> Any:
    """Run ``action`` until the database answers; a Conflict is an answer too (returned, not raised).

    A connection error (the server restarting) fails the transaction, which changed nothing or
    committed: the caller's next step finds out which. The engine's pool has already thrown away
    the broken connections (and pings those idle for a while, see ``drivers.PsycopgDriver.prepare``),
    so the retry reconnects.
    """
    while True:
        try:
            return action()
        except (DatabaseError, ConcurrentChange):
            stats["db_errors"] += 1
            time.sleep(OUTAGE_PAUSE_S)
        except Conflict as conflict:
            return conflict


def work(
    url: str,
    namespace: str,
    jobs: list[str],
    final_job: str,
    total: int,
    worker_id: str,
    fail_rate: float,
    seed: int,
    lease_s: float,
    out_dir: str,
    victim_after: int = -1,
) -> None:
    """Process lots until every lot of ``final_job`` is READY. A victim (``victim_after`` >= 0) records
    its claim number ``victim_after`` to a file and then hangs, holding it, until it is killed."""
    # 10 % random failures: some lot of 6,000 fails three times in a row in most runs, which the
    # default LOTLINE_MAX_ATTEMPTS would give up on. This run retries until every lot is done (the
    # limit itself: tests/coordination/test_retries_end.py).
    lineage = Lineage.over(Store(url), max_attempts=UNTIL_DONE)
    lots = lineage.lots
    rng = random.Random(seed)
    lease = timedelta(seconds=lease_s)
    stats = {"claims": 0, "completed": 0, "failed": 0, "rejected": 0, "db_errors": 0, "reaped": 0}
    last_reap = 0.0
    started = time.monotonic()
    while time.monotonic() - started < DEADLINE_S:
        if time.monotonic() - last_reap > REAP_EVERY_S:
            reaped = _retrying(lots.reap, stats)
            stats["reaped"] += reaped if isinstance(reaped, int) else 0
            last_reap = time.monotonic()
        claim = None
        for job in reversed(jobs):  # downstream first: finished lots leave the pipeline early
            found = _retrying(lambda job=job: lots.claim(worker_id, namespace, job, lease=lease), stats)
            if isinstance(found, LotClaim):
                claim = found
                break
        if claim is None:
            counts = _retrying(lambda: lots.counts(namespace, final_job), stats)
            if isinstance(counts, dict) and counts.get(Status.READY, 0) == total:
                break
            # Idle: take the failed lots off their back-off, as `lotline run` does (10 s, doubling,
            # would only make the run wait; tests with an advanced clock cover the back-off).
            waiting = [_retrying(lambda job=job: lots.retry_now(namespace, job), stats) for job in jobs]
            if not any(isinstance(n, int) and n > 0 for n in waiting):
                time.sleep(rng.uniform(0.05, 0.15))  # let the busy ones have the database
            continue
        stats["claims"] += 1
        if stats["claims"] - 1 == victim_after:
            # Written whole, then renamed: the test kills this process as soon as the file exists.
            scratch = Path(out_dir, f"{worker_id}.claim.tmp")
            scratch.write_text(claim_to_json(claim))
            scratch.replace(Path(out_dir, f"{worker_id}.claim.json"))
            time.sleep(DEADLINE_S)  # holding the claim until SIGKILL
        if stats["claims"] % 5 == 0:
            _retrying(lambda claim=claim: lots.heartbeat(claim, lease), stats)
        failing = rng.random() < fail_rate
        finish = lots.fail if failing else lots.complete
        outcome = _retrying(lambda claim=claim, finish=finish: finish(claim), stats)
        if isinstance(outcome, Conflict):
            stats["rejected"] += 1  # lease lost (slow or reconnected after the commit): the lot is rerun
        else:
            stats["failed" if failing else "completed"] += 1
    Path(out_dir, f"{worker_id}.stats.json").write_text(json.dumps(stats))
    lineage.close()


def land(url: str, namespace: str, job: str, lot_ids: list[str], out_dir: str) -> None:
    """Land every source lot (a job without inputs, claimed by name), as data arrives."""
    lineage = Lineage.over(Store(url))
    lots = lineage.lots
    stats = {"db_errors": 0, "reaped": 0}
    for lot in lot_ids:
        while True:
            claim = _retrying(lambda lot=lot: lots.claim("lander", namespace, job, lot=lot), stats)
            if isinstance(claim, LotClaim):
                done = _retrying(lambda claim=claim: lots.complete(claim), stats)
                if not isinstance(done, Conflict):
                    break
            elif "already READY" in str(claim):
                break
            time.sleep(0.05)
            reaped = _retrying(lots.reap, stats)
            stats["reaped"] += reaped if isinstance(reaped, int) else 0
    Path(out_dir, "lander.stats.json").write_text(json.dumps(stats))
    lineage.close()
