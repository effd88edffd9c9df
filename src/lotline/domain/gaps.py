"""Gap reports: which lots of a time range are not complete, and why, as runs of consecutive lots.

A year of five-minute lots is 105,120 lots; the report never makes one object per lot. Lots are
numbered by ``lot_index`` (consecutive lots of one interval have consecutive indexes), READY lots
are read as counts of ten lots where they can be (``domain.ready_counts``), and every list is a
run ``[start, stop)`` of one state (docs/lots.md, "Gap reports and backfill").
"""

from __future__ import annotations

import bisect
import datetime
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from lotline.domain.checks import CheckFailed
from lotline.domain.coordination import Status, gave_up_line
from lotline.domain.errors import InvalidInput
from lotline.domain.lots import (
    Interval,
    IntervalLot,
    covering_index,
    day_index,
    lot_at,
    lot_from_index,
    lot_index,
    parse_lot,
)

#: The longest range a report or a backfill covers (ten years; leap days included).
MAX_RANGE = datetime.timedelta(days=3653)

_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
#: An instant; without an offset it is UTC, as lot windows are (and as the web UI reads it).
_INSTANT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?([Zz]|[+-][0-9]{2}:[0-9]{2})?"
)


class GapState(StrEnum):
    COMPLETE = "complete"  # READY: present, whatever its data (an empty lot is present)
    #: READY and readable, but made by an older version of its job than the job's current one
    #: (its transform, checks, inputs, outputs or settings changed since): ``Made`` says which.
    STALE = "stale"
    RUNNING = "running"  # a live or expired-but-not-reaped claim
    FAILED = "failed"  # ERROR: its last attempt failed (with its reason), whether or not its data is removed
    MISSING = "missing"  # never produced (no row), or reopened (RESUBMIT)
    HELD = "held"  # HOLD or PENDING, or any missing/failed lot of a held job
    BLOCKED = "blocked"  # missing or failed, and an input lot it needs is not READY
    #: Not settled yet, never trouble: the lot is not due (its end plus the lateness window of the
    #: sources it comes from lies after now), or it is due and an input it waits for is pending, or
    #: it is a due source lot that its ``absent=empty`` policy has yet to declare (domain/arrival.py).
    PENDING = "pending"


#: The order of the report's counts.
STATES = tuple(GapState)


def parse_time(label: str, text: str) -> datetime.datetime:
    """An RFC 3339 instant (``2023-01-01T04:10:00Z``; without an offset, UTC) or a date
    (``2023-01-01``: its midnight UTC)."""
    if not isinstance(text, str) or not (_DATE.fullmatch(text) or _INSTANT.fullmatch(text)):
        raise InvalidInput(
            f"{label} {text!r} is not an RFC 3339 instant (2023-01-01T04:10:00Z) or a date (2023-01-01)."
        )
    try:
        if _DATE.fullmatch(text):
            return datetime.datetime.combine(datetime.date.fromisoformat(text), datetime.time(), datetime.UTC)
        found = datetime.datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
        return (found if found.tzinfo else found.replace(tzinfo=datetime.UTC)).astimezone(datetime.UTC)
    except (ValueError, OverflowError) as error:
        raise InvalidInput(f"{label} {text!r} is not a valid date or time: {error}.") from None


@dataclass(frozen=True)
class TimeRange:
    """``[start, end)``; the lots reported are those whose windows intersect it."""

    start: datetime.datetime
    end: datetime.datetime

    @classmethod
    def parse(cls, start: str, end: str) -> TimeRange:
        found = cls(parse_time("from", start), parse_time("to", end))
        if found.end <= found.start:
            raise InvalidInput(f"from {start!r} must be before to {end!r}.")
        if found.end - found.start > MAX_RANGE:
            raise InvalidInput(f"the range {start} .. {end} is longer than the limit of ten years.")
        return found

    def indexes(self, interval: Interval) -> tuple[int, int]:
        """The lot indexes ``[first, stop)`` of ``interval`` whose windows intersect the range."""
        last = lot_at(self.end - datetime.timedelta(microseconds=1), interval)
        return lot_index(lot_at(self.start, interval)), lot_index(last) + 1


def state_of(status: str | None) -> GapState:
    """The report's state of a lot from its OUTPUT row's status (None: no row). A failed lot is
    failed, never missing, even once its failed attempt's data is removed (SPEC §5)."""
    if status in (Status.HOLD, Status.PENDING):
        return GapState.HELD
    if status == Status.READY:
        return GapState.COMPLETE
    if status == Status.RUNNING:
        return GapState.RUNNING
    if status == Status.ERROR:
        return GapState.FAILED
    return GapState.MISSING


#: The rows a filter by state reads: ``state_of`` turned around (a blocked lot is a missing or
#: failed one whose input is not READY: a filter finds it among those, named blocked).
STATUSES_OF = {
    GapState.COMPLETE: (Status.READY,),
    GapState.RUNNING: (Status.RUNNING,),
    GapState.FAILED: (Status.ERROR,),
    GapState.MISSING: (Status.RESUBMIT,),
    GapState.HELD: (Status.HOLD, Status.PENDING),
}
#: A consumer's read of a lot (its INPUT row) in words: under way, done for good, or released to
#: be read again (its input failed or was reopened; the consumer itself never failed).
READ_WORDS = {Status.RUNNING: "reading", Status.DONE: "read", Status.ERROR: "to read again"}


@dataclass(frozen=True)
class LastAttempt:
    """Why a failed lot failed: its last attempt and that attempt's one-line reason (None: none
    recorded)."""

    attempt: int
    reason: str | None
    #: Given up on after this many failed attempts in a row (None: it is retried after its back-off).
    gave_up_after: int | None = None
    #: The failure's kind (``Failure.kind``: ``check_failed`` for a failing check; None: another error).
    kind: str | None = None

    @property
    def gave_up(self) -> str | None:
        """``gave up after 3 attempts`` for a lot given up on."""
        return None if self.gave_up_after is None else gave_up_line(self.gave_up_after)


@dataclass(frozen=True)
class Cause:
    """What a blocked lot waits for: a run of an input dataset's lots that are not READY."""

    dataset: str
    first: str
    last: str
    state: GapState


@dataclass(frozen=True)
class Made:
    """A stale lot's job versions, numbered per job: the one that made it and the current one."""

    by: int
    now: int

    @property
    def line(self) -> str:
        """``made by version 3, now 4``."""
        return f"made by version {self.by}, now {self.now}"


@dataclass(frozen=True)
class Segment:
    """Lots ``[start, stop)`` (lot indexes) in one state."""

    start: int
    stop: int
    state: GapState
    cause: Cause | None = None
    failure: LastAttempt | None = None
    made: Made | None = None


def index_of(lot: str, interval: Interval) -> int:
    """``lot_index`` of a stored interval lot id of ``interval``, without building the lot (ids read
    from the store are valid: they were checked when written)."""
    return indexes_of((lot,), interval)[0]


def indexes_of(lots: Iterable[str], interval: Interval) -> list[int]:
    """``index_of`` of each of ``lots``, each day's first index worked out once (a five-year grid
    reads tens of thousands of empty lots, a day's in a row)."""
    width = interval.ordinal_width
    days: dict[str, int] = {}
    found = []
    for lot in lots:
        day = days.get(lot[:8])
        if day is None:
            day = days[lot[:8]] = day_index(
                datetime.date(int(lot[:4]), int(lot[4:6]), int(lot[6:8])), interval
            )
        found.append(day + int(lot[-width:]))
    return found


def states_at(found: Sequence[Segment], indexes: Iterable[int]) -> dict[int, GapState]:
    """The state of each of ``indexes`` that a segment of ``found`` holds (a report's segments are
    disjoint); an index no segment holds is absent: complete. A bisection per index, so a dataset's
    every lot costs no more than a sort."""
    ordered = sorted(found, key=lambda s: s.start)
    starts = [s.start for s in ordered]
    held: dict[int, GapState] = {}
    for index in indexes:
        i = bisect.bisect_right(starts, index) - 1
        if i >= 0 and index < ordered[i].stop:
            held[index] = ordered[i].state
    return held


def id_pattern(interval: Interval) -> str:
    """A LIKE pattern that matches the ids of ``interval``'s lots and no other lot id."""
    return "_" * 8 + interval.token + "_" * interval.ordinal_width


def segments(
    first: int,
    stop: int,
    ready: Sequence[tuple[int, int]],
    other: Mapping[int, GapState],
    failures: Mapping[int, LastAttempt] | None = None,
) -> list[Segment]:
    """The lots of ``[first, stop)`` that are not complete, as coalesced segments: outside the
    ``ready`` runs, a lot is in the state of its row (``other``, with its ``failures``) or missing."""
    failures = failures or {}
    rows = sorted(other)
    pieces: list[Segment] = []
    for gap_start, gap_stop in _complement(first, stop, ready):
        position = gap_start
        for i in rows[bisect.bisect_left(rows, gap_start) : bisect.bisect_left(rows, gap_stop)]:
            if i > position:
                pieces.append(Segment(position, i, GapState.MISSING))
            pieces.append(Segment(i, i + 1, other[i], failure=failures.get(i)))
            position = i + 1
        if position < gap_stop:
            pieces.append(Segment(position, gap_stop, GapState.MISSING))
    return coalesce(pieces)


def _complement(first: int, stop: int, ready: Sequence[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    position = first
    for start, end in ready:
        if start > position:
            yield position, start
        position = max(position, end)
    if position < stop:
        yield position, stop


def coalesce(pieces: Iterable[Segment]) -> list[Segment]:
    """Merge touching segments of one state, cause and failure (``pieces`` in index order)."""
    merged: list[Segment] = []
    for piece in pieces:
        last = merged[-1] if merged else None
        same = last is not None and (last.state, last.cause, last.failure, last.made) == (
            piece.state,
            piece.cause,
            piece.failure,
            piece.made,
        )
        if last and last.stop == piece.start and same:
            merged[-1] = replace(last, stop=piece.stop)
        else:
            merged.append(piece)
    return merged


def hold_all(found: Sequence[Segment]) -> list[Segment]:
    """A held job claims nothing: its missing and failed lots are held."""
    waiting = (GapState.MISSING, GapState.FAILED)
    return coalesce(replace(s, state=GapState.HELD) if s.state in waiting else s for s in found)


def blockers(
    dataset: str, input_segments: Sequence[Segment], input_interval: Interval, output_interval: Interval
) -> list[Segment]:
    """An input's lots that are not READY, as the output lots they block (an output lot of a mapped
    job is made of consecutive input lots: ``output / input`` of them, or a calendar's count)."""
    return [
        Segment(
            covering_index(s.start, input_interval, output_interval),
            covering_index(s.stop - 1, input_interval, output_interval) + 1,
            GapState.BLOCKED,
            Cause(
                dataset,
                str(lot_from_index(s.start, input_interval)),
                str(lot_from_index(s.stop - 1, input_interval)),
                s.state,
            ),
        )
        for s in input_segments
    ]


def block(found: Sequence[Segment], blocking: Iterable[Segment]) -> list[Segment]:
    """Mark the missing and failed lots that an input does not let run as blocked, naming why.

    Where several inputs block a lot, the first given (the earlier input lot) is named.
    """
    ordered: list[Segment] = []
    for b in sorted(blocking, key=lambda s: s.start):
        start = max(b.start, ordered[-1].stop) if ordered else b.start
        if start < b.stop:
            ordered.append(replace(b, start=start))
    starts = [b.start for b in ordered]
    pieces: list[Segment] = []
    for seg in found:
        if seg.state not in (GapState.MISSING, GapState.FAILED):
            pieces.append(seg)
            continue
        position = seg.start
        i = max(bisect.bisect_right(starts, seg.start) - 1, 0)
        while position < seg.stop and i < len(ordered) and ordered[i].start < seg.stop:
            b = ordered[i]
            if b.stop <= position:
                i += 1
                continue
            if b.start > position:
                pieces.append(replace(seg, start=position, stop=b.start))
                position = b.start
            end = min(b.stop, seg.stop)
            pieces.append(replace(b, start=position, stop=end))
            position = end
        if position < seg.stop:
            pieces.append(replace(seg, start=position))
    return coalesce(pieces)


def due_stop(until: datetime.datetime, interval: Interval) -> int:
    """The index of the first lot of ``interval`` that is not due when lots ending at or before
    ``until`` are (``ArrivalPolicy.due_until``)."""
    last = lot_at(until - datetime.timedelta(microseconds=1), interval)
    return lot_index(last) + (1 if last.end <= until else 0)


def settle(found: Sequence[Segment], stop: int) -> list[Segment]:
    """Lots not settled yet are pending, never trouble: missing or blocked lots from ``stop`` on
    (not due), and blocked lots whose input is pending."""
    waiting = (GapState.MISSING, GapState.BLOCKED)
    pieces: list[Segment] = []
    for seg in found:
        if seg.state is GapState.BLOCKED and seg.cause is not None and seg.cause.state is GapState.PENDING:
            pieces.append(Segment(seg.start, seg.stop, GapState.PENDING))
        elif seg.state in waiting and seg.stop > stop:
            if seg.start < stop:
                pieces.append(replace(seg, stop=stop))
            pieces.append(Segment(max(seg.start, stop), seg.stop, GapState.PENDING))
        else:
            pieces.append(seg)
    return coalesce(pieces)


def awaiting_declaration(found: Sequence[Segment], start: int) -> list[Segment]:
    """A source whose policy declares absence empty: its lots from ``start`` on (those its arrival
    pass watches) with nothing delivered are pending until the pass declares them; earlier ones
    nobody declared (an ingest range or an operator does) are missing."""
    pieces: list[Segment] = []
    for seg in found:
        if seg.state is GapState.MISSING and seg.stop > start:
            if seg.start < start:
                pieces.append(replace(seg, stop=start))
            pieces.append(replace(seg, start=max(seg.start, start), state=GapState.PENDING))
        else:
            pieces.append(seg)
    return coalesce(pieces)


def mark_stale(found: Sequence[Segment], stale: Mapping[int, Made]) -> list[Segment]:
    """The complete lots of ``stale`` (by index: READY lots an older job version made) as stale
    segments among ``found``; an index a segment holds already is left as it is."""
    if not stale:
        return list(found)
    held = states_at(found, stale)
    pieces = [*found, *(Segment(i, i + 1, GapState.STALE, made=m) for i, m in stale.items() if i not in held)]
    return coalesce(sorted(pieces, key=lambda s: s.start))


def counts(found: Sequence[Segment], total: int) -> dict[GapState, int]:
    """Lots per state; whatever no segment covers is complete."""
    tally = dict.fromkeys(STATES, 0)
    for seg in found:
        tally[seg.state] += seg.stop - seg.start
    tally[GapState.COMPLETE] = total - sum(tally.values())
    return tally


@dataclass(frozen=True)
class LotRun:
    """Consecutive lots in one state, as the report lists them (``first``..``last``, inclusive)."""

    state: GapState
    first: str
    last: str
    count: int
    cause: Cause | None = None
    #: Failed lots: their last attempt and its reason (the same for every lot of the run).
    failure: LastAttempt | None = None
    #: Stale lots: the job version that made them and the current one.
    made: Made | None = None

    @property
    def why(self) -> str:
        """What the run waits on (blocked), why it failed (failed), or which job version made it
        (stale); empty for the rest."""
        if self.cause is not None:
            return f"{self.cause.dataset} {self.cause.first}..{self.cause.last} ({self.cause.state.value})"
        if self.failure is not None:
            failure = self.failure
            gave_up = "" if failure.gave_up_after is None else f", {gave_up_line(failure.gave_up_after)}"
            return f"attempt {failure.attempt}{gave_up}: {failure.reason or 'no reason recorded'}"
        if self.made is not None:
            return self.made.line
        return ""


def runs(found: Sequence[Segment], interval: Interval) -> list[LotRun]:
    return [
        LotRun(
            s.state,
            str(lot_from_index(s.start, interval)),
            str(lot_from_index(s.stop - 1, interval)),
            s.stop - s.start,
            s.cause,
            s.failure,
            s.made,
        )
        for s in found
    ]


def without_rows(run: LotRun, interval: Interval, present: Sequence[str]) -> list[LotRun]:
    """The parts of ``run`` whose lots have no row (``present``: the ids of the dataset's lots that
    have one): what a listing of rows leaves out — never delivered, blocked before any attempt, not
    due yet."""
    first, stop = index_of(run.first, interval), index_of(run.last, interval) + 1
    taken = sorted(i for i in indexes_of(present, interval) if first <= i < stop)
    found, at = [], first
    for i in (*taken, stop):
        if i > at:
            found.append(Segment(at, i, run.state, run.cause, run.failure, run.made))
        at = max(at, i + 1)
    return runs(found, interval)


def lot_ids(found: Iterable[Segment], interval: Interval) -> list[str]:
    """Every lot id of ``found`` (for the writes of a backfill, which name each lot)."""
    return [str(lot_from_index(i, interval)) for s in found for i in range(s.start, s.stop)]


@dataclass(frozen=True)
class GapReport:
    """A job's or dataset's lots over a range: counts by state and runs of the lots not complete.

    ``interval`` is None for a dataset of named lots: then only rows that exist are reported.
    """

    namespace: str
    dataset: str
    job: str | None
    interval: Interval | None
    start: datetime.datetime
    end: datetime.datetime
    total: int
    counts: dict[GapState, int]
    runs: list[LotRun]

    @property
    def failed_by_check(self) -> int:
        """The failed lots whose last attempt a failing check failed (of ``counts[FAILED]``)."""
        return sum(
            r.count
            for r in self.runs
            if r.state is GapState.FAILED and r.failure is not None and r.failure.kind == CheckFailed.code
        )


#: What a backfill may take: ``complete`` and ``stale`` lots are reopened, ``missing`` and ``failed``
#: ones hinted.
BACKFILL_STATES = (GapState.MISSING, GapState.FAILED, GapState.COMPLETE, GapState.STALE)
#: Reopened rather than hinted: lots that are READY.
REOPENED_STATES = (GapState.COMPLETE, GapState.STALE)


def parse_only(values: Sequence[str] | None) -> tuple[GapState, ...]:
    """``--only missing,failed``: which lots a backfill takes (default: all of them, stale ones
    with the complete ones)."""
    if not values:
        return BACKFILL_STATES
    allowed = ", ".join(s.value for s in BACKFILL_STATES)
    chosen = []
    for value in (v.strip() for text in values for v in text.split(",")):
        if value not in {s.value for s in BACKFILL_STATES}:
            raise InvalidInput(f"backfill cannot take {value!r} lots; choose among {allowed}.")
        chosen.append(GapState(value))
    return tuple(dict.fromkeys(chosen))


@dataclass(frozen=True)
class Backfill:
    """What a backfill did (or, dry, would do): ``reopened`` READY lots (with ``cascaded`` lots
    downstream), ``hinted`` missing/failed lots a worker will now claim, ``unhinted`` missing lots
    of a job without inputs (its workers name their lots), and what it left: blocked, held, running."""

    report: GapReport
    dry_run: bool
    reopened: list[LotRun]
    cascaded: int
    hinted: list[LotRun]
    unhinted: list[LotRun]
    left: list[LotRun]


def _instant(value: datetime.datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def bounds_json(first: str, last: str) -> dict[str, str]:
    """A run's bounds: ``start``/``end`` in its interval's zone (with the offset, ``Z`` in UTC) and
    as UTC instants (``startUtc``/``endUtc``); none for named lots."""
    low, high = parse_lot(first), parse_lot(last)
    if not isinstance(low, IntervalLot) or not isinstance(high, IntervalLot):
        return {}
    return {
        "start": _instant(low.local_start),
        "end": _instant(high.local_end),
        "startUtc": _instant(low.start),
        "endUtc": _instant(high.end),
    }


def run_json(run: LotRun) -> dict[str, object]:
    cause = run.cause
    waiting = (
        None
        if cause is None
        else {"dataset": cause.dataset, "from": cause.first, "to": cause.last, "state": cause.state.value}
    )
    failure = run.failure
    return {
        "state": run.state.value,
        "from": run.first,
        "to": run.last,
        **bounds_json(run.first, run.last),
        "count": run.count,
        "waitingOn": waiting,
        "attempt": None if failure is None else failure.attempt,
        "reason": None if failure is None else failure.reason,
        "gaveUpAfter": None if failure is None else failure.gave_up_after,
        "madeByVersion": None if run.made is None else run.made.by,
        "currentVersion": None if run.made is None else run.made.now,
    }


def report_json(report: GapReport, offset: int = 0, limit: int | None = None) -> dict[str, object]:
    """The report as the CLI's ``--json`` and the REST API show it; ``runs`` may be one page."""
    shown = report.runs[offset:] if limit is None else report.runs[offset : offset + limit]
    return {
        "namespace": report.namespace,
        "dataset": report.dataset,
        "job": report.job,
        "interval": None if report.interval is None else str(report.interval),
        "zone": None if report.interval is None else report.interval.zone or "UTC",
        "from": report.start.isoformat().replace("+00:00", "Z"),
        "to": report.end.isoformat().replace("+00:00", "Z"),
        "totalLots": report.total,
        "counts": {s.value: report.counts[s] for s in STATES},
        "failedByCheck": report.failed_by_check,
        "runs": [run_json(r) for r in shown],
        "totalRuns": len(report.runs),
    }


def backfill_json(done: Backfill) -> dict[str, object]:
    return {
        "dryRun": done.dry_run,
        "report": report_json(done.report),
        "reopened": [run_json(r) for r in done.reopened],
        "cascaded": done.cascaded,
        "hinted": [run_json(r) for r in done.hinted],
        "unhinted": [run_json(r) for r in done.unhinted],
        "left": [run_json(r) for r in done.left],
    }
