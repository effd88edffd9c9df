"""Lot identifiers: the units in which datasets are processed.

An *interval lot* is a UTC time window named ``yyyyMMdd`` + ISO-8601 duration + zero-padded ordinal
within the day, e.g. ``20230101PT5M050`` = 2023-01-01 04:10-04:15 UTC. Ids of one duration are
fixed-width, so sorting them as strings sorts them in time. Any other id matching
``[A-Za-z0-9._=-]{1,128}`` (except ``.`` and ``..``) is a *named lot*, e.g. ``2023-01-01``.
"""

from __future__ import annotations

import datetime
import functools
import re
from dataclasses import dataclass

from lotline.domain.errors import InvalidInput

MINUTES_PER_DAY = 1440
MAX_LOT_ID_LENGTH = 128

_NAMED_LOT_CHARS = re.compile(r"[A-Za-z0-9._=-]+")
_DURATION = re.compile(r"PT([0-9]+)([MH])|P([0-9]+)D")
# Deliberately looser than a valid id (any case, any unit letters): whatever *looks* like an interval lot
# id must be a valid one, so a typo such as ``20230101pt5m050`` is rejected instead of becoming a named lot.
_INTERVAL_SHAPE = re.compile(r"([0-9]{8})(PT?(?:[0-9]+[A-Z])+)([0-9]+)", re.IGNORECASE)


def _quote(value: str, limit: int = 140) -> str:
    """Quote a value for an error message, escaping control characters and cutting very long values."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + "..."


@dataclass(frozen=True)
class Interval:
    """A lot duration; ``minutes`` divides a day, so windows never straddle midnight."""

    minutes: int

    def __post_init__(self) -> None:
        if isinstance(self.minutes, bool) or not isinstance(self.minutes, int):
            raise InvalidInput(f"interval minutes must be an integer, got {self.minutes!r}.")
        _check_minutes(self.minutes, f"an interval of {self.minutes} minutes")

    @classmethod
    def parse(cls, text: str) -> Interval:
        """Parse a canonical duration (``PT5M``, ``PT1H``, ``P1D``); other spellings are refused."""
        match = _DURATION.fullmatch(text) if isinstance(text, str) and len(text) <= 16 else None
        if match is None:
            shown = _quote(text) if isinstance(text, str) else repr(text)
            raise InvalidInput(
                f"duration {shown} is not of the form PTnM, PTnH or P1D (upper case, e.g. 'PT5M', 'PT1H')."
            )
        minutes_text, unit, days_text = match.groups()
        if days_text is not None:
            minutes = int(days_text) * MINUTES_PER_DAY
        else:
            minutes = int(minutes_text) * (60 if unit == "H" else 1)
        _check_minutes(minutes, f"duration {_quote(text)}")
        interval = cls(minutes)
        if str(interval) != text:
            raise InvalidInput(f"duration {_quote(text)} is not canonical; write '{interval}'.")
        return interval

    def __str__(self) -> str:
        if self.minutes == MINUTES_PER_DAY:
            return "P1D"
        if self.minutes % 60 == 0:
            return f"PT{self.minutes // 60}H"
        return f"PT{self.minutes}M"

    @property
    def windows_per_day(self) -> int:
        return MINUTES_PER_DAY // self.minutes

    @property
    def ordinal_width(self) -> int:
        """Digits of the ordinal: 4 only when a day has more than 1000 windows (PT1M), else 3."""
        return 4 if self.windows_per_day > 1000 else 3

    @property
    def timedelta(self) -> datetime.timedelta:
        return datetime.timedelta(minutes=self.minutes)


def _check_minutes(minutes: int, shown: str) -> None:
    if minutes <= 0:
        raise InvalidInput(f"{shown} is not positive; durations run from PT1M to PT12H, or P1D.")
    if MINUTES_PER_DAY % minutes != 0:
        raise InvalidInput(
            f"{shown} does not divide a day (1440 minutes) evenly; "
            "allowed are PT1M..PT12H where the minutes divide 1440, and P1D."
        )


@functools.total_ordering
@dataclass(frozen=True)
class IntervalLot:
    """One window of ``interval`` on a UTC ``day``; ordered by start time, then by duration."""

    day: datetime.date
    interval: Interval
    ordinal: int

    def __post_init__(self) -> None:
        # A datetime is a date too, but would make equal lots compare unequal.
        if isinstance(self.day, datetime.datetime) or not isinstance(self.day, datetime.date):
            raise InvalidInput(f"lot day must be a datetime.date, got {self.day!r}.")
        last = self.interval.windows_per_day - 1
        is_int = isinstance(self.ordinal, int) and not isinstance(self.ordinal, bool)
        if not is_int or not 0 <= self.ordinal <= last:
            width = self.interval.ordinal_width
            raise InvalidInput(
                f"ordinal {self.ordinal!r} is out of range for {self.interval} "
                f"({0:0{width}d}..{last:0{width}d})."
            )

    @property
    def start(self) -> datetime.datetime:
        midnight = datetime.datetime.combine(self.day, datetime.time(), tzinfo=datetime.UTC)
        return midnight + self.ordinal * self.interval.timedelta

    @property
    def end(self) -> datetime.datetime:
        return self.start + self.interval.timedelta

    def __str__(self) -> str:
        # Not strftime: it does not zero-pad years below 1000 on every platform.
        day = f"{self.day.year:04d}{self.day.month:02d}{self.day.day:02d}"
        return f"{day}{self.interval}{self.ordinal:0{self.interval.ordinal_width}d}"

    def _sort_key(self) -> tuple[datetime.date, int, int]:
        return (self.day, self.ordinal * self.interval.minutes, self.interval.minutes)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, IntervalLot):
            return NotImplemented
        return self._sort_key() < other._sort_key()


@dataclass(frozen=True)
class NamedLot:
    """A lot named by its producer (e.g. ``2023-01-01``); it has no time window lotline can compute."""

    id: str

    def __post_init__(self) -> None:
        _check_id_syntax(self.id)
        if _INTERVAL_SHAPE.fullmatch(self.id):
            raise InvalidInput(f"lot id {_quote(self.id)} is shaped like an interval lot; use IntervalLot.")

    def __str__(self) -> str:
        return self.id


def _check_id_syntax(text: str) -> None:
    """Rules for every lot id: ids become storage path segments, so nothing may escape or confuse them."""
    if not isinstance(text, str):
        raise InvalidInput(f"lot id must be a string, got {type(text).__name__}.")
    if not text:
        raise InvalidInput("lot id must not be empty.")
    if len(text) > MAX_LOT_ID_LENGTH:
        raise InvalidInput(
            f"lot id {_quote(text, 40)} is {len(text)} characters long; the limit is {MAX_LOT_ID_LENGTH}."
        )
    if not _NAMED_LOT_CHARS.fullmatch(text):
        position, char = next((i, c) for i, c in enumerate(text) if not _NAMED_LOT_CHARS.fullmatch(c))
        raise InvalidInput(
            f"lot id {_quote(text)} contains {char!r} at position {position}; "
            "lot ids use only letters A-Z a-z, digits and . _ = -"
        )
    if text in (".", ".."):
        raise InvalidInput(f"lot id {text!r} is reserved: it would escape a storage path.")


def parse_lot(text: str) -> IntervalLot | NamedLot:
    """Parse a lot id; anything shaped like an interval lot id must be a valid one."""
    _check_id_syntax(text)
    match = _INTERVAL_SHAPE.fullmatch(text)
    if match is None:
        return NamedLot(text)
    day_text, duration_text, ordinal_text = match.groups()
    try:
        interval = Interval.parse(duration_text)
    except InvalidInput as error:
        raise InvalidInput(f"lot id {_quote(text)}: {error.message}") from error
    try:
        day = datetime.date(int(day_text[:4]), int(day_text[4:6]), int(day_text[6:]))
    except ValueError:
        message = f"lot id {_quote(text)} has an invalid date {day_text!r} (expected yyyyMMdd)."
        raise InvalidInput(message) from None
    width = interval.ordinal_width
    if len(ordinal_text) != width:
        raise InvalidInput(
            f"lot id {_quote(text)}: ordinal {ordinal_text!r} must have exactly {width} digits "
            f"for {interval}."
        )
    try:
        return IntervalLot(day, interval, int(ordinal_text))
    except InvalidInput as error:
        raise InvalidInput(f"lot id {_quote(text)}: {error.message}") from error


def validate_lot_id(text: str) -> str:
    """Return ``text`` unchanged if it is a valid lot id, else raise InvalidInput saying why."""
    parse_lot(text)
    return text


def lot_at(instant: datetime.datetime, interval: Interval) -> IntervalLot:
    """The lot of ``interval`` whose window contains ``instant``; naive times are refused as ambiguous."""
    if not isinstance(instant, datetime.datetime):
        raise InvalidInput(f"instant must be a datetime, got {instant!r}.")
    if instant.utcoffset() is None:
        raise InvalidInput(f"instant {instant.isoformat()!r} has no time zone; lot windows are in UTC.")
    utc = instant.astimezone(datetime.UTC)
    return IntervalLot(utc.date(), interval, (utc.hour * 60 + utc.minute) // interval.minutes)


def lot_index(lot: IntervalLot) -> int:
    """Position of a lot among all lots of its interval, counted from 0001-01-01."""
    return lot.day.toordinal() * lot.interval.windows_per_day + lot.ordinal


def lot_from_index(index: int, interval: Interval) -> IntervalLot:
    day, ordinal = divmod(index, interval.windows_per_day)
    return IntervalLot(datetime.date.fromordinal(day), interval, ordinal)


def lots_between(start: datetime.datetime, end: datetime.datetime, interval: Interval) -> list[IntervalLot]:
    """The lots whose windows intersect ``[start, end)``, in time order; empty when ``start == end``."""
    first, last = lot_at(start, interval), lot_at(end, interval)
    if end < start:
        raise InvalidInput(f"end {end.isoformat()!r} is before start {start.isoformat()!r}.")
    if end == start:
        return []
    # The window starting exactly at ``end`` does not intersect the half-open range.
    stop = lot_index(last) + (0 if last.start == end else 1)
    return [lot_from_index(i, interval) for i in range(lot_index(first), stop)]


def _check_finer(fine: Interval, coarse: Interval) -> int:
    """How many ``fine`` windows make one ``coarse`` window; both divide a day, so they are aligned."""
    if fine.minutes > coarse.minutes:
        raise InvalidInput(f"input interval {fine} is coarser than output interval {coarse}.")
    if coarse.minutes % fine.minutes != 0:
        raise InvalidInput(f"input interval {fine} does not divide output interval {coarse} evenly.")
    return coarse.minutes // fine.minutes


def input_lots_for(output_lot: IntervalLot, input_interval: Interval) -> list[IntervalLot]:
    """The finer input lots that together make up ``output_lot``, in time order."""
    count = _check_finer(input_interval, output_lot.interval)
    first = output_lot.ordinal * count
    return [IntervalLot(output_lot.day, input_interval, first + i) for i in range(count)]


def output_lot_for(input_lot: IntervalLot, output_interval: Interval) -> IntervalLot:
    """The coarser output lot that contains ``input_lot``."""
    count = _check_finer(input_lot.interval, output_interval)
    return IntervalLot(input_lot.day, output_interval, input_lot.ordinal // count)
