"""``lotline worker``'s loop: claim and run lots of a pipeline's jobs until stopped.

Unlike ``lotline run`` it never runs out of work: when nothing is eligible it waits for the lot
event log (a lot published or reopened anywhere — woken by LISTEN/NOTIFY on PostgreSQL, polling
on SQLite) or ``poll`` seconds, whichever comes first. Every round it also reaps expired claims,
so a dead worker's lot is taken over after its lease. A lot that failed is not claimed again before
its back-off has run out (10 s after the first failure, doubling, at most 10 minutes), kept in the
database and so shared by every worker, or until an input lot gets a new version
(docs/coordination.md "Back-off"). A database outage (a PostgreSQL restart) is waited out: the loop
tries again after 0.5 s, doubling up to 10 s, and resumes. One loop per process: run more processes
(on more machines) for more parallelism; they coordinate through the database only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from lotline.domain.coordination import gave_up_line
from lotline.domain.errors import DatabaseUnavailable
from lotline.services.outage import Outage
from lotline.spark.pipeline import JobSpec
from lotline.spark.runner import LotResult, LotRunner
from lotline.store.engine import Listener

log = logging.getLogger(__name__)
DEFAULT_POLL_S = 5.0
#: Seconds between the worker's arrival passes (services/arrival.py): a due lot is noticed within it.
ARRIVAL_PASS_S = 30.0


@dataclass
class WorkerTally:
    done: int = 0
    failed: int = 0


class Worker:
    def __init__(
        self,
        runner: LotRunner,
        jobs: list[JobSpec],
        *,
        name: str,
        poll: float = DEFAULT_POLL_S,
        on_result: Callable[[LotResult], None] = lambda _: None,
    ) -> None:
        self.runner, self.jobs, self.name, self.poll = runner, jobs, name, poll
        self.on_result = on_result
        self.tally = WorkerTally()

    def run(self, stop: threading.Event, idle_exit: float | None = None) -> WorkerTally:
        """Work until ``stop`` is set (the current lot is finished first), or until nothing was
        eligible for ``idle_exit`` seconds. While the database is unreachable it waits and tries
        again (``services.outage``: one line when it goes, one when it is back), listening anew."""
        lineage = self.runner.lineage
        outage = Outage(stop=stop)
        synced = False
        subscription: Listener | None = None
        idle_since = time.monotonic()
        noticed_at = -ARRIVAL_PASS_S
        try:
            while not stop.is_set():
                try:
                    if subscription is None:
                        subscription = lineage.lot_events.subscribe()
                    if not synced:  # lots reopened or published while no runner ran: tables follow
                        self.runner.sync_tables()
                        synced = True
                    self.runner.follow_tables()  # and what others changed since, every round
                    lineage.lots.reap()
                    if (
                        time.monotonic() - noticed_at >= ARRIVAL_PASS_S
                    ):  # due lots: OVERDUE, or empty by policy
                        lineage.arrival_pass.notice()
                        noticed_at = time.monotonic()
                    worked = self._one_round(stop)
                    outage.recovered()
                    if worked:
                        idle_since = time.monotonic()
                        continue
                    if idle_exit is not None and time.monotonic() - idle_since >= idle_exit:
                        break
                    subscription.wait(self.poll if idle_exit is None else min(self.poll, idle_exit))
                except DatabaseUnavailable as error:
                    if subscription is not None:
                        subscription.close()
                        subscription = None
                    outage.wait(error)
                    idle_since = time.monotonic()  # an outage is not idleness
        finally:
            if subscription is not None:
                subscription.close()
        return self.tally

    def _one_round(self, stop: threading.Event) -> bool:
        """Claim and run every eligible lot of every job once over; True if any lot was run."""
        worked = False
        for job in self.jobs:
            while not stop.is_set():
                claim = self.runner.claim(self.name, job)
                if claim is None:
                    break
                worked = True
                result = self.runner.execute(job, claim)
                if result.ok:
                    self.tally.done += 1
                    log.info(
                        "%s lot %s attempt %d done in %.1f s",
                        job.name,
                        result.lot,
                        result.attempt,
                        result.seconds,
                    )
                else:
                    self.tally.failed += 1
                    given_up = self.runner.lineage.lots.given_up(self.runner.namespace, job.name)
                    after = given_up.get(result.lot)
                    if after is None:
                        log.warning("%s; retried after its back-off", result.error)
                    else:
                        log.warning(
                            "%s; %s (`lotline retry %s` retries it)",
                            result.error,
                            gave_up_line(after),
                            job.name,
                        )
                self.on_result(result)
        return worked
