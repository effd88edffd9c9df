"""Runs of READY lots from the store's counts of ten consecutive lots (``ready_lot_counts``).

A count's key is a lot id less its last character: the lots of one day whose ordinals differ only
in their last digit (ten, or fewer at the end of a day). A gap report reads the READY lots of each
day, the counts of the tens of incomplete days that it cannot tell otherwise, and the READY rows of
only those tens that are neither full nor empty; everything else follows from the counts
(docs/lots.md, "Reading complete stretches").
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lotline.domain.lots import Interval, day_index, lot_from_index

#: Lots per count: the ordinals that share all but their last digit.
TEN = 10


def day_length(interval: Interval) -> int:
    """Characters of a lot id's day part: ``yyyyMMdd`` and the interval."""
    return 8 + len(interval.token)


def count_pattern(interval: Interval) -> str:
    """A LIKE pattern that matches the count keys of ``interval``'s lots and no other key."""
    return "_" * 8 + interval.token + "_" * (interval.ordinal_width - 1)


def count_key(index: int, interval: Interval) -> str:
    """The count key of the lot at ``index``."""
    return str(lot_from_index(index, interval))[:-1]


def _day_start(key: str, interval: Interval) -> int:
    return day_index(datetime.date(int(key[:4]), int(key[4:6]), int(key[6:8])), interval)


@dataclass(frozen=True, slots=True)
class Counted:
    """What the counts tell of a range: ``ready`` pieces ``[start, stop)`` READY throughout, and
    the ``unsure`` lots (of tens neither full nor empty) whose rows must say, by lot id."""

    ready: list[tuple[int, int]]
    unsure: dict[str, int]


def from_counts(
    first: int,
    stop: int,
    interval: Interval,
    days: Mapping[str, tuple[int, int]],
    tens: Mapping[str, int],
) -> Counted:
    """The READY pieces and unsure lots of ``[first, stop)`` from the counts: ``days`` (a day's
    READY lots, and how many of its tens have some) and the listed ``tens`` of the incomplete days
    (``store.queries.gaps.DayCounts``: a ten not listed is full when all the day's tens have READY
    lots, empty otherwise)."""
    per_day = interval.windows_per_day
    tens_per_day = -(-per_day // TEN)
    length = day_length(interval)
    listed: dict[str, dict[int, int]] = {}
    for key, count in tens.items():
        listed.setdefault(key[:length], {})[int(key[length:])] = count
    ready: list[tuple[int, int]] = []
    unsure: dict[str, int] = {}
    width = interval.ordinal_width
    for day in sorted(days):
        lots, present = days[day]
        start = _day_start(day, interval)
        if lots == per_day:
            ready.append((start, start + per_day))
            continue
        of_day = listed.get(day, {})
        for ten in range(tens_per_day):
            low, high = start + TEN * ten, start + min(TEN * (ten + 1), per_day)
            count = of_day.get(ten, high - low if present == tens_per_day else 0)
            if count == high - low:
                ready.append((low, high))
            elif count > 0:
                for lot in range(max(low, first), min(high, stop)):
                    unsure[f"{day}{lot - start:0{width}d}"] = lot
    return Counted(ready, unsure)


def ready_runs(first: int, stop: int, pieces: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The READY ``pieces`` clipped to ``[first, stop)`` and merged into runs, in order."""
    runs: list[tuple[int, int]] = []
    for piece_start, piece_end in sorted(pieces):
        start, end = max(piece_start, first), min(piece_end, stop)
        if start >= end:
            continue
        if runs and start <= runs[-1][1]:
            runs[-1] = (runs[-1][0], max(runs[-1][1], end))
        else:
            runs.append((start, end))
    return runs
