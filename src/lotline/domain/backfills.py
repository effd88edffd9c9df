"""What became of a backfill's lots: the runs of lots it reopened or queued, each counted by the
state its lots are in now (read from a gap report over the backfill's range), so a progress view
can say how much of it is done."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lotline.domain.errors import InvalidInput
from lotline.domain.gaps import STATES, GapReport, GapState, index_of
from lotline.domain.lots import IntervalLot, lot_at, lot_from_index, lot_index, parse_lot

#: The most runs of lots a progress view follows (its URL names each).
MAX_RUNS = 200


@dataclass(frozen=True)
class RunProgress:
    """One run of a backfill's lots (``first``..``last``, inclusive) and its lots by state now."""

    first: str
    last: str
    counts: dict[GapState, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def done(self) -> int:
        return self.counts[GapState.COMPLETE]


def parse_runs(values: Sequence[str], report: GapReport) -> list[tuple[int, int]]:
    """``FIRST~LAST`` lot ids (as the backfill answered them) as lot indexes ``[start, stop)``,
    each inside the report's range and of its interval."""
    if len(values) > MAX_RUNS:
        raise InvalidInput(f"lots: at most {MAX_RUNS} runs of lots, got {len(values)}.")
    interval, found = report.interval, []
    if interval is None:
        raise InvalidInput(f"Dataset {report.dataset} has named lots: a backfill takes time lots only.")
    lowest, highest = (lot_index(lot_at(at, interval)) for at in (report.start, report.end))
    for value in values:
        first, _sep, last = value.partition("~")
        lots = [parse_lot(p) for p in (first, last or first)] if first else []
        if not lots or not all(isinstance(lot, IntervalLot) and lot.interval == interval for lot in lots):
            raise InvalidInput(f"lots: {value[:80]!r} is not FIRST~LAST, two {interval} lot ids.")
        start, stop = index_of(str(lots[0]), interval), index_of(str(lots[1]), interval) + 1
        if not lowest <= start < stop <= highest:
            raise InvalidInput(f"lots: {value[:80]!r} is not a run of lots inside the range.")
        found.append((start, stop))
    return found


def progress(report: GapReport, runs: Sequence[tuple[int, int]]) -> list[RunProgress]:
    """Each run's lots by their state in ``report`` (lots no report run covers are complete)."""
    interval = report.interval
    if interval is None:
        return []
    pieces = [(index_of(r.first, interval), index_of(r.last, interval) + 1, r.state) for r in report.runs]
    found = []
    for start, stop in runs:
        counts = dict.fromkeys(STATES, 0)
        for first, end, state in pieces:
            overlap = min(stop, end) - max(start, first)
            if overlap > 0:
                counts[state] += overlap
        counts[GapState.COMPLETE] = (stop - start) - sum(counts.values())
        first_lot, last_lot = lot_from_index(start, interval), lot_from_index(stop - 1, interval)
        found.append(RunProgress(str(first_lot), str(last_lot), counts))
    return found
