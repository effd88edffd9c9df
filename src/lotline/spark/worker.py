"""``lotline worker``'s loop: claim and run lots of a pipeline's jobs until stopped.

Unlike ``lotline run`` it never runs out of work: when nothing is eligible it waits for the lot
event log (a lot published or reopened anywhere — woken by LISTEN/NOTIFY on PostgreSQL, polling
on SQLite) or ``poll`` seconds, whichever comes first. Every round it also reaps expired claims,
so a dead worker's lot is taken over after its lease. A lot that failed is passed over for a while
(``Backoff``: 10 s after the first failure, doubling, at most 10 minutes) so that a poisoned lot
does not spin; it is retried when its time comes. A database outage (a PostgreSQL restart) is
waited out: the loop tries again after 0.5 s, doubling up to 10 s, and resumes. One loop per
process: run more processes (on more machines) for more parallelism; they coordinate through the
database only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lotline.domain.errors import DatabaseUnavailable
from lotline.services.outage import Outage
from lotline.spark.pipeline import JobSpec
from lotline.spark.runner import LotResult, LotRunner
from lotline.store.engine import Listener

log = logging.getLogger(__name__)
DEFAULT_POLL_S = 5.0


@dataclass
class Backoff:
    """When a (job, lot) that failed may be tried again."""

    first: float = 10.0
    cap: float = 600.0
    clock: Callable[[], float] = time.monotonic
    _failures: dict[tuple[str, str], int] = field(default_factory=dict)
    _until: dict[tuple[str, str], float] = field(default_factory=dict)

    def failed(self, job: str, lot: str) -> float:
        """Record a failure; returns the seconds the lot is now passed over for."""
        count = self._failures.get((job, lot), 0) + 1
        self._failures[(job, lot)] = count
        delay: float = min(self.cap, self.first * 2.0 ** (count - 1))
        self._until[(job, lot)] = self.clock() + delay
        return delay

    def succeeded(self, job: str, lot: str) -> None:
        self._failures.pop((job, lot), None)
        self._until.pop((job, lot), None)

    def failures(self) -> list[tuple[str, str]]:
        return list(self._until)

    def waiting(self, job: str) -> _Waiting:
        return _Waiting(self, job)

    def is_waiting(self, job: str, lot: str) -> bool:
        until = self._until.get((job, lot))
        return until is not None and self.clock() < until


@dataclass(frozen=True)
class _Waiting:
    """The lots of one job still backing off, as ``claim(skip=…)`` takes them."""

    backoff: Backoff
    job: str

    def __contains__(self, lot: object) -> bool:
        return isinstance(lot, str) and self.backoff.is_waiting(self.job, lot)

    def __bool__(self) -> bool:
        """False when nothing waits: the claim may then take the database's one-call path."""
        return any(
            self.backoff.is_waiting(job, lot) for job, lot in self.backoff.failures() if job == self.job
        )


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
        backoff: Backoff | None = None,
        on_result: Callable[[LotResult], None] = lambda _: None,
    ) -> None:
        self.runner, self.jobs, self.name, self.poll = runner, jobs, name, poll
        self.backoff = backoff or Backoff()
        self.on_result = on_result
        self.tally = WorkerTally()

    def run(self, stop: threading.Event, idle_exit: float | None = None) -> WorkerTally:
        """Work until ``stop`` is set (the current lot is finished first), or until nothing was
        eligible for ``idle_exit`` seconds. While the database is unreachable it waits and tries
        again (``services.outage``: one line when it goes, one when it is back), listening anew."""
        lineage = self.runner.lineage
        outage = Outage(stop=stop)
        subscription: Listener | None = None
        idle_since = time.monotonic()
        try:
            while not stop.is_set():
                try:
                    if subscription is None:
                        subscription = lineage.lot_events.subscribe()
                    lineage.lots.reap()
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
                claim = self.runner.claim(self.name, job, self.backoff.waiting(job.name))
                if claim is None:
                    break
                worked = True
                result = self.runner.execute(job, claim)
                if result.ok:
                    self.tally.done += 1
                    self.backoff.succeeded(job.name, result.lot)
                    log.info(
                        "%s lot %s attempt %d done in %.1f s",
                        job.name,
                        result.lot,
                        result.attempt,
                        result.seconds,
                    )
                else:
                    self.tally.failed += 1
                    delay = self.backoff.failed(job.name, result.lot)
                    log.warning("%s; passed over for %.0f s", result.error, delay)
                self.on_result(result)
        return worked
