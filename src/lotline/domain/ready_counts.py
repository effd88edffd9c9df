"""Runs of READY lots from the store's counts of ten consecutive lots (``ready_lot_counts``).

A count's key is a lot id less its last character: the lots of one day whose ordinals differ only
in their last digit (ten, or fewer at the end of a day). A gap report reads the days whose counts
add up to the whole day, the counts of the other days that have READY lots, and the READY rows of
only those tens that are neither full nor empty; everything else follows from the counts
(docs/lots.md, "Reading complete stretches").
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Iterable, Mapping

from lotline.domain.lots import Interval, lot_from_index

#: Lots per count: the ordinals that share all but their last digit.
TEN = 10


def day_length(interval: Interval) -> int:
    """Characters of a lot id's day part: ``yyyyMMdd`` and the interval."""
    return 8 + len(str(interval))


def count_pattern(interval: Interval) -> str:
    """A LIKE pattern that matches the count keys of ``interval``'s lots and no other key."""
    return "_" * 8 + str(interval) + "_" * (interval.ordinal_width - 1)


def count_key(index: int, interval: Interval) -> str:
    """The count key of the lot at ``index``."""
    return str(lot_from_index(index, interval))[:-1]


def _day_start(key: str, interval: Interval) -> int:
    day = datetime.date(int(key[:4]), int(key[4:6]), int(key[6:8])).toordinal()
    return day * interval.windows_per_day


def day_lots(day: str, interval: Interval) -> tuple[int, int]:
    """``[start, stop)`` of the lots of ``day`` (a lot id's day part)."""
    start = _day_start(day, interval)
    return start, start + interval.windows_per_day


def ten_lots(key: str, interval: Interval) -> tuple[int, int]:
    """``[start, stop)`` of the lots counted under ``key``."""
    tens = int(key[day_length(interval) :])
    start = _day_start(key, interval)
    return start + TEN * tens, start + min(TEN * (tens + 1), interval.windows_per_day)


def unsure_lots(first: int, stop: int, tens: Mapping[str, int], interval: Interval) -> list[int]:
    """The lots of ``[first, stop)`` counted under keys that are neither full nor empty: whether
    each is READY is read from its row."""
    found: list[int] = []
    for key, ready in tens.items():
        start, end = ten_lots(key, interval)
        if 0 < ready != end - start:
            found.extend(range(max(start, first), min(end, stop)))
    return sorted(found)


def ready_runs(
    first: int,
    stop: int,
    interval: Interval,
    days: Iterable[str],
    tens: Mapping[str, int],
    ready: Collection[int],
) -> list[tuple[int, int]]:
    """Runs ``[start, stop)`` of READY lots within ``[first, stop)``, in order: the complete
    ``days``, the full ``tens`` (READY lots by count key) of the other days, and the ``ready`` lots
    read one by one (those of ``unsure_lots``)."""
    pieces = [day_lots(day, interval) for day in days]
    for key, count in tens.items():
        start, end = ten_lots(key, interval)
        if count == end - start:
            pieces.append((start, end))
    pieces += [(lot, lot + 1) for lot in ready]
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
