"""Cooperative lot locking (SPEC §4) and arc states (SPEC §5) as pure rules.

The data-status table stores only a status per (dataset, lot, job); the locks are implied by it.
This module is the one place that says what each status means, so the claim query, the CLI
status view and the docs all agree.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from lotline.domain.errors import Conflict, InvalidInput
from lotline.domain.lots import Interval, IntervalLot, check_tiles, input_lots_for, output_lot_for, parse_lot


class Role(StrEnum):
    INPUT = "INPUT"
    OUTPUT = "OUTPUT"


class Status(StrEnum):
    RUNNING = "RUNNING"
    READY = "READY"
    DONE = "DONE"
    ERROR = "ERROR"
    RESUBMIT = "RESUBMIT"
    PENDING = "PENDING"
    HOLD = "HOLD"


OUTPUT_STATUSES = (Status.RUNNING, Status.READY, Status.ERROR, Status.RESUBMIT, Status.PENDING, Status.HOLD)

#: An OUTPUT row in one of these (or no row at all) lets its producer claim the lot.
CLAIMABLE_OUTPUT = (Status.ERROR, Status.RESUBMIT)
#: An INPUT row in one of these is the job-local read lock: the job may not take the lot again.
INPUT_LOCKED = (Status.RUNNING, Status.DONE)

#: (role, status) -> (lock, meaning); ``None`` status = no row. The table of SPEC §4, verbatim.
LOCKS: dict[tuple[Role, Status | None], tuple[str, str]] = {
    (Role.OUTPUT, Status.RUNNING): (
        "global read+write",
        "being produced: nobody reads it, nobody else writes it",
    ),
    (Role.OUTPUT, Status.READY): (
        "global write",
        "published: consumers may read; no rewrite unless reopened",
    ),
    (Role.OUTPUT, Status.ERROR): ("global read", "failed: consumers blocked; the producer may retry"),
    (Role.OUTPUT, Status.RESUBMIT): (
        "global read",
        "reopened: consumers blocked; the producer may run again",
    ),
    (Role.OUTPUT, Status.PENDING): ("global read+write", "manual treatment"),
    (Role.OUTPUT, Status.HOLD): ("global read+write", "operator pause"),
    (Role.OUTPUT, None): ("none", "never produced"),
    (Role.INPUT, Status.RUNNING): ("job-local read", "this job is consuming this lot"),
    (Role.INPUT, Status.DONE): ("job-local read, kept", "this job finished this lot: never re-run on it"),
    (Role.INPUT, Status.ERROR): ("released", "retry allowed"),
    (Role.INPUT, None): ("none", ""),
}


def lock_of(role: Role, status: Status | None) -> str:
    """The lock a row implies; statuses the seed leaves open count as a read+write lock."""
    found = LOCKS.get((role, status))
    return found[0] if found else "global read+write"


class ArcState(StrEnum):
    RUNNING = "running"
    COMPLETE = "complete"
    PARTIAL = "partial"
    MISSING = "missing"


class ArcAction(StrEnum):
    CLAIM = "claim"
    COMPLETE = "complete"
    FAIL = "fail"
    CLEAN = "clean"
    REOPEN = "reopen"


#: SPEC §5's allowed arc transitions, by the action that makes them. ``reopen`` (complete ->
#: missing) is the operator's invalidation of SPEC §4, the one move SPEC §5's list leaves out.
ARC_TRANSITIONS: dict[tuple[ArcState, ArcAction], ArcState] = {
    (ArcState.MISSING, ArcAction.CLAIM): ArcState.RUNNING,
    (ArcState.PARTIAL, ArcAction.CLAIM): ArcState.RUNNING,
    (ArcState.RUNNING, ArcAction.COMPLETE): ArcState.COMPLETE,
    (ArcState.RUNNING, ArcAction.FAIL): ArcState.PARTIAL,
    (ArcState.PARTIAL, ArcAction.CLEAN): ArcState.MISSING,
    (ArcState.COMPLETE, ArcAction.REOPEN): ArcState.MISSING,
}


def plan_arc(current: ArcState, action: ArcAction) -> ArcState:
    """The arc state ``action`` leads to, or Conflict naming the state and what it allows."""
    target = ARC_TRANSITIONS.get((current, action))
    if target is None:
        allowed = [a.value for (state, a) in ARC_TRANSITIONS if state is current]
        raise Conflict(
            f"Cannot {action.value} an arc that is {current.value}; allowed: {', '.join(allowed) or 'none'}.",
            current=current.value,
            allowed=allowed,
        )
    return target


def arc_state(
    status: Status | None, held_status: Status | None = None, data_removed: bool = False
) -> ArcState:
    """Derive the arc state of (job, lot) from its OUTPUT row (a held row: from the status it paused)."""
    if status is Status.HOLD:
        return arc_state(held_status, None, data_removed)
    if status is Status.RUNNING:
        return ArcState.RUNNING
    if status is Status.READY:
        return ArcState.COMPLETE
    if status is Status.ERROR and not data_removed:
        return ArcState.PARTIAL
    return ArcState.MISSING


@dataclass(frozen=True)
class LotMapping:
    """How a job's input lots make its output lots when the intervals differ (``PT5M->PT1H``).

    All inputs of a mapped job share the input interval; an output lot is eligible only when every
    input lot that makes it up is READY. No mapping (``None``) means output lot = input lot.
    """

    input: Interval
    output: Interval

    @classmethod
    def parse(cls, text: str) -> LotMapping:
        parts = text.split("->") if isinstance(text, str) else []
        if len(parts) != 2:
            raise InvalidInput(f"lot mapping {text!r} is not of the form INPUT->OUTPUT, e.g. 'PT5M->PT1H'.")
        mapping = cls(Interval.parse(parts[0]), Interval.parse(parts[1]))
        try:
            check_tiles(mapping.input, mapping.output)
        except InvalidInput as error:
            raise InvalidInput(f"lot mapping {text!r}: {error.message}") from None
        return mapping

    def __str__(self) -> str:
        return f"{self.input}->{self.output}"

    def output_lot(self, input_lot: str) -> str | None:
        """The output lot an input lot belongs to; None for a lot of another interval."""
        parsed = parse_lot(input_lot)
        if not isinstance(parsed, IntervalLot) or parsed.interval != self.input:
            return None
        return str(output_lot_for(parsed, self.output))

    def hinted_lot(self, lot: str) -> str | None:
        """The output lot a work-list hint stands for: an input lot's output lot, or an output lot itself."""
        parsed = parse_lot(lot)
        if isinstance(parsed, IntervalLot) and parsed.interval == self.output:
            return lot
        return self.output_lot(lot)

    def input_lots(self, output_lot: str) -> list[str]:
        """Every input lot that makes up ``output_lot``, in time order."""
        parsed = parse_lot(output_lot)
        if not isinstance(parsed, IntervalLot) or parsed.interval != self.output:
            raise InvalidInput(f"lot {output_lot!r} is not a {self.output} lot, which this job produces.")
        return [str(lot) for lot in input_lots_for(parsed, self.input)]


MAX_OWNER = 200

#: The back-off of a failed lot (shared by every worker: it is the lot's retry hint in the database):
#: retried 10 s after its first failure in a row, twice as long after each next one, at most 10 minutes.
FIRST_RETRY = timedelta(seconds=10)
MAX_RETRY = timedelta(minutes=10)


#: How many failed attempts in a row, on unchanged inputs and job version, before lotline gives up on a
#: lot (``LOTLINE_MAX_ATTEMPTS``): it then stays failed until an input lot gets a new version, the job
#: version changes, or an operator retries it.
DEFAULT_MAX_ATTEMPTS = 3
#: The ``not_before`` of a lot given up on: its retry hint is never due by itself (any other hint
#: raised for the lot replaces it, as it replaces a back-off).
GAVE_UP = datetime(9999, 12, 31, tzinfo=UTC)


def check_max_attempts(value: object, source: str = "LOTLINE_MAX_ATTEMPTS") -> int:
    """A count of attempts, at least 1 (``"3"`` read from the environment is 3)."""
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if text is None or not text.isdigit() or int(text) < 1:
        raise InvalidInput(f"{source} must be a whole number of attempts, at least 1, got {value!r}.")
    return int(text)


def gave_up_line(attempts: int) -> str:
    """How every interface says that a lot was given up on."""
    return f"gave up after {attempts} attempt{'' if attempts == 1 else 's'}"


def retry_delay(failures: int) -> timedelta:
    """How long a lot waits before it is retried after failing ``failures`` (>= 1) times in a row."""
    doublings = min(max(failures, 1) - 1, 32)
    delay: timedelta = FIRST_RETRY * (1 << doublings)
    return min(MAX_RETRY, delay)


def check_owner(owner: str) -> str:
    """Worker ids go into every fenced statement; they must be non-empty and printable."""
    if not isinstance(owner, str) or not owner or len(owner) > MAX_OWNER or not owner.isprintable():
        raise InvalidInput(f"worker id must be 1..{MAX_OWNER} printable characters, got {owner!r}.")
    return owner


@dataclass(frozen=True)
class LotClaim:
    """A live claim on one (job, output lot): the fence a worker must present to finish it."""

    namespace: str
    job: str
    dataset: str
    lot: str
    input_lots: tuple[tuple[str, str], ...]
    owner: str
    job_id: uuid.UUID
    dataset_id: uuid.UUID
    attempt: int
    run_id: uuid.UUID
    lease_expires_at: datetime
    #: Failures in a row of this lot before this claim (0 unless the claim retries a failure on the
    #: same inputs): a failure of this claim waits ``retry_delay(failures + 1)`` before the next try.
    failures: int = 0
    #: A job with several outputs: every output as (name, id), ``dataset`` first; empty otherwise.
    outputs: tuple[tuple[str, uuid.UUID], ...] = ()

    @property
    def output_datasets(self) -> tuple[tuple[str, uuid.UUID], ...]:
        """Every output lot this claim publishes, as (dataset name, id): the first carries the claim."""
        return self.outputs or ((self.dataset, self.dataset_id),)


@dataclass(frozen=True)
class LotStatus:
    """One row of the data-status table, as the status view shows it."""

    namespace: str
    dataset: str
    lot: str
    job: str
    role: Role
    status: Status
    held_status: Status | None
    attempt: int
    owner: str | None
    lease_expires_at: datetime | None
    run_id: uuid.UUID | None
    arc: ArcState | None
    lock: str
    #: Why the row's run failed, in one line (``runs.error``): set for ERROR lots.
    error: str | None = None
    #: An ERROR lot given up on: after this many failed attempts in a row (None: it is retried).
    gave_up_after: int | None = None

    @property
    def gave_up(self) -> str | None:
        """``gave up after 3 attempts`` for a lot given up on."""
        return None if self.gave_up_after is None else gave_up_line(self.gave_up_after)
