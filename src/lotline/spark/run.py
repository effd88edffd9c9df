"""``lotline run``'s loop: every eligible lot of every job, downstream lots as they become eligible.

Jobs are visited in dependency order, each claimed until it has nothing eligible; the visit is
repeated while any lot was done, so a lot that becomes eligible because an upstream lot was just
published is run in the same invocation. ``workers`` claim loops share the one SparkSession (a
Spark application runs jobs of several threads at once; sessions are per process). A lot that
failed before is tried once more at once (an invocation is an operator asking: it does not wait for
the lot's back-off, docs/coordination.md "Back-off"); a lot that fails is retried up to ``retries``
times, then passed over for the rest of the run (``claim(skip=…)``). Each visit starts by reaping
expired claims, as a worker's round does, so that the lot of a killed run is taken again; lots that
another worker's claim holds are passed over and reported.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lotline.domain.coordination import LotClaim, LotMapping, LotStatus, Status, gave_up_line
from lotline.domain.lots import IntervalLot, parse_lot
from lotline.spark.pipeline import JobSpec
from lotline.spark.runner import Interrupted, LotResult, LotRunner


@dataclass
class JobTally:
    """Per job: lots done, lots left failed, attempts retried, lots skipped (an upstream lot failed),
    lots held (another worker's claim had them when the run ended)."""

    done: int = 0
    failed: int = 0
    retried: int = 0
    skipped: int = 0
    held: int = 0
    seconds: float = 0.0


@dataclass
class RunSummary:
    tallies: dict[str, JobTally]
    #: The last error of every lot left failed, as "job J lot L (attempt N): …".
    errors: list[str] = field(default_factory=list)
    #: Per job and owner, the lots another worker's claim held: "job J: 2 lots held by a live claim …".
    held: list[str] = field(default_factory=list)
    #: Ctrl-C stopped the run (its lots in progress failed as "interrupted by the user").
    interrupted: bool = False
    #: Per job and ``warn`` check that did not hold:
    #: "job parse: check status < 500 warned on 3 lots (12 rows)".
    warnings: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.errors)


@dataclass(frozen=True)
class Window:
    """``--from``/``--to``: only interval lots whose window intersects [start, end)."""

    start: datetime
    end: datetime

    def admits(self, lot: str) -> bool:
        parsed = parse_lot(lot)
        return isinstance(parsed, IntervalLot) and parsed.start < self.end and parsed.end > self.start


class _PassOver:
    """The lots a claim loop passes over: given up after their retries, or outside the window."""

    def __init__(self, window: Window | None) -> None:
        self.window = window
        self.given_up: set[str] = set()

    @property
    def active(self) -> bool:
        return self.window is not None or bool(self.given_up)

    def __contains__(self, lot: object) -> bool:
        if not isinstance(lot, str):
            return False
        return lot in self.given_up or (self.window is not None and not self.window.admits(lot))


class _Run:
    def __init__(self, runner: LotRunner, jobs: list[JobSpec], retries: int, window: Window | None) -> None:
        self.runner, self.jobs, self.retries = runner, jobs, retries
        self.lock = threading.Lock()
        self.tallies = {j.name: JobTally() for j in jobs}
        self.pass_over = {j.name: _PassOver(window) for j in jobs}
        self.failures: Counter[tuple[str, str]] = Counter()
        self.errors: dict[tuple[str, str], str] = {}
        self.interrupted = False
        #: (job, check) -> [lots published with it failing, its failing rows (None: not counted)].
        self.warned: dict[tuple[str, str], list[Any]] = {}

    def loop(self, worker: str, on_result: Callable[[LotResult], None]) -> None:
        """Reap, then visit the jobs in order, until a whole visit claims nothing, or Ctrl-C."""
        progressed = True
        while progressed and not self.runner.interrupted:
            progressed = False
            self.runner.lineage.lots.reap()
            self.runner.lineage.arrival_pass.notice()  # due source lots: OVERDUE, or empty by policy
            for job in self.jobs:
                while not self.runner.interrupted and (claim := self._claim(worker, job)) is not None:
                    progressed = True
                    try:
                        result = self.runner.execute(job, claim)
                    except Interrupted as stopped:
                        self.interrupted = True
                        self.record(job, stopped.result)
                        on_result(stopped.result)
                        return
                    if self.record(job, result):
                        self.retry_now(job, [result.lot])
                    on_result(result)

    def retry_now(self, job: JobSpec, lots: list[str] | None = None) -> None:
        """Take failed lots of ``job`` (``lots``, or all) off their back-off for this run's claims."""
        self.runner.lineage.lots.retry_now(self.runner.namespace, job.name, lots)

    def _claim(self, worker: str, job: JobSpec) -> LotClaim | None:
        """Without lots to pass over, a claim may take the database's one-call path (PostgreSQL)."""
        pass_over = self.pass_over[job.name]
        return self.runner.claim(worker, job, pass_over if pass_over.active else ())

    def record(self, job: JobSpec, result: LotResult) -> bool:
        """Tally the result; True if the lot failed and is to be retried now."""
        key = (job.name, result.lot)
        with self.lock:
            tally = self.tallies[job.name]
            tally.seconds += result.seconds
            if result.ok:
                tally.done += 1
                self.errors.pop(key, None)
                for check, rows in result.warnings:
                    seen = self.warned.setdefault((job.name, check), [0, 0])
                    seen[0] += 1
                    seen[1] = None if rows is None or seen[1] is None else seen[1] + rows
                return False
            self.failures[key] += 1
            self.errors[key] = result.error or "failed"
            if self.failures[key] > self.retries or result.lot in self._given_up(job.name):
                self.pass_over[job.name].given_up.add(result.lot)
                return False
            tally.retried += 1
            return True

    def _given_up(self, job: str) -> dict[str, int]:
        """The job's lots given up on (LOTLINE_MAX_ATTEMPTS failures in a row): not retried."""
        return self.runner.lineage.lots.given_up(self.runner.namespace, job)

    def summary(self, ours: Container[str]) -> RunSummary:
        """What the run did; ``ours``: the owner names of its claim loops."""
        given_up = {job: self._given_up(job) for job in sorted({job for job, _ in self.errors})}
        for (job, lot), error in self.errors.items():
            if (after := given_up[job].get(lot)) is not None:
                self.errors[(job, lot)] = (
                    f"{error} — {gave_up_line(after)} (`lotline retry {job}` retries it)"
                )
        for job, _ in self.errors:
            self.tallies[job].failed += 1
        for job, count in _downstream(self.jobs, self.errors).items():
            self.tallies[job].skipped += count
        held = []
        for spec in self.jobs:
            claims = [c for c in self._held(spec) if c.owner not in ours]
            self.tallies[spec.name].held = len(claims)
            held += _held_lines(spec.name, claims)
        errors = [self.errors[k] for k in sorted(self.errors)]
        warnings = [
            f"job {job}: check {check} warned on {lots} lot{'' if lots == 1 else 's'}"
            + ("" if rows is None else f" ({rows} row{'' if rows == 1 else 's'})")
            for (job, check), (lots, rows) in sorted(self.warned.items())
        ]
        return RunSummary(self.tallies, errors, held, self.interrupted or self.runner.interrupted, warnings)

    def _held(self, job: JobSpec) -> list[LotStatus]:
        """The job's lots still RUNNING (at most the first 1,000) within the run's window."""
        lots = self.runner.lineage.lots
        page = lots.status_page(self.runner.namespace, job=job.name, statuses=[Status.RUNNING], limit=1000)
        window = self.pass_over[job.name].window
        return [c for c in page.items if window is None or window.admits(c.lot)]


def _held_lines(job: str, claims: Iterable[LotStatus]) -> list[str]:
    """One line per owner: how many lots its claims hold, until when (live, or expired since the
    last reap: the next run or worker reaps those)."""
    by_owner: dict[str, list[LotStatus]] = defaultdict(list)
    for claim in claims:
        by_owner[claim.owner or "?"].append(claim)
    lines = []
    now = datetime.now(UTC)
    for owner, held in sorted(by_owner.items()):
        until = max((c.lease_expires_at for c in held if c.lease_expires_at), default=None)
        count = f"{len(held)} lot{'s' if len(held) > 1 else ''}"
        if until is not None and until <= now:
            lines.append(
                f"job {job}: {count} held by an expired claim of worker {owner}, skipped (reaped next time)"
            )
        else:
            shown = "" if until is None else f" (lease until {until.isoformat(timespec='seconds')})"
            lines.append(f"job {job}: {count} held by a live claim of worker {owner}{shown}, skipped")
    return lines


def _downstream(jobs: list[JobSpec], failed: Iterable[tuple[str, str]]) -> Counter[str]:
    """Lots of later jobs that cannot run because a lot they need was left failed (transitively)."""
    consumers: dict[str, list[JobSpec]] = defaultdict(list)
    producer_of = {d.name: j for j in jobs for d in j.outputs}
    for job in jobs:
        for dataset in job.inputs:
            if dataset.name in producer_of:
                consumers[producer_of[dataset.name].name].append(job)
    blocked: set[tuple[str, str]] = set()
    todo = list(failed)
    while todo:
        job_name, lot = todo.pop()
        for consumer in consumers[job_name]:
            mapping = LotMapping.parse(consumer.lot_mapping) if consumer.lot_mapping else None
            made = mapping.output_lot(lot) if mapping else lot
            if made is not None and (consumer.name, made) not in blocked:
                blocked.add((consumer.name, made))
                todo.append((consumer.name, made))
    return Counter(job for job, _ in blocked)


def run_pipeline(
    runner: LotRunner,
    jobs: list[JobSpec],
    *,
    worker: str,
    workers: int = 1,
    retries: int = 0,
    window: Window | None = None,
    on_result: Callable[[LotResult], None] = lambda _: None,
) -> RunSummary:
    """Process every eligible lot of ``jobs`` (in dependency order), then return what happened. Ctrl-C
    fails the lots in progress (``interrupted by the user``) and ends the run early: the summary says
    ``interrupted``."""
    runner.sync_tables()  # lots reopened or published while no runner ran: the tables follow
    run = _Run(runner, jobs, retries, window)
    for job in jobs:
        run.retry_now(job)
    if workers == 1:
        try:
            run.loop(worker, on_result)
        except KeyboardInterrupt:  # between lots: nothing was in progress
            run.interrupted = True
        return run.summary({worker})
    errors: list[BaseException] = []

    def loop(index: int) -> None:
        try:
            run.loop(f"{worker}-{index}", on_result)
        except BaseException as error:  # e.g. the database went away: stop this loop, report it
            errors.append(error)

    threads = [threading.Thread(target=loop, args=(i,), name=f"claim loop {i}") for i in range(workers)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:  # the main thread only waits: stop the loops, let them fail their lots
        runner.interrupt()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return run.summary({f"{worker}-{i}" for i in range(workers)})
