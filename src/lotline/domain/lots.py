"""Lot identifiers: the units in which datasets are processed.

An *interval lot* is a UTC time window named ``yyyyMMdd`` + ISO-8601 duration + zero-padded ordinal
within the day, e.g. ``20230101PT5M050`` = 2023-01-01 04:10-04:15 UTC. A calendar lot is named by its
first day with ordinal 000 (``20260202P1W000`` the ISO week from Monday 2026-02-02, ``20260201P1M000``
February 2026, ``20260101P1Y000``); a lot of a day or longer in a zone names the zone between dots
(``20260308P1D.America.New_York.000``: that local day, 23 hours). Ids of one interval are
fixed-width, so sorting them as strings sorts them in time. Any other id matching
``[A-Za-z0-9._=-]{1,128}`` (except ``.`` and ``..``) is a *named lot*, e.g. ``2023-01-01``.
"""

from __future__ import annotations

import datetime
import functools
import re
import zoneinfo
from dataclasses import dataclass

from lotline.domain.errors import InvalidInput

MINUTES_PER_DAY = 1440
MAX_LOT_ID_LENGTH = 128

_NAMED_LOT_CHARS = re.compile(r"[A-Za-z0-9._=-]+")
_DURATION = re.compile(r"PT([0-9]+)([MH])|P([0-9]+)([DWMY])")
#: A zoned interval as written in declarations and mappings: ``P1D[America/New_York]``.
_ZONED = re.compile(r"([^\[\]]+)\[([^\[\]]*)\]")
# Deliberately looser than a valid id (any case, any unit letters): whatever *looks* like an interval lot
# id must be a valid one, so a typo such as ``20230101pt5m050`` is rejected instead of becoming a named lot.
# A zoned lot names its zone between dots before the ordinal: ``20260308P1D.America.New_York.000``.
_INTERVAL_SHAPE = re.compile(
    r"([0-9]{8})(PT?(?:[0-9]+[A-Z])+)(?:\.([A-Za-z0-9_.=-]+)\.)?([0-9]+)", re.IGNORECASE
)
#: Calendar intervals and their longest length in minutes (a week; a 31-day month; a leap year).
CALENDAR_MINUTES = {"W": 7 * MINUTES_PER_DAY, "M": 31 * MINUTES_PER_DAY, "Y": 366 * MINUTES_PER_DAY}
_FORMS = "PTnM, PTnH, P1D, P1W, P1M or P1Y"


def _quote(value: str, limit: int = 140) -> str:
    """Quote a value for an error message, escaping control characters and cutting very long values."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + "..."


def check_zone(zone: object) -> str:
    """A time zone key ``zoneinfo`` knows, as lotline stores it (``""`` for UTC, the default)."""
    if not isinstance(zone, str) or not zone or len(zone) > 64:
        raise InvalidInput(f"zone {zone!r} is not a time zone name such as 'America/New_York'.")
    if zone == "UTC":
        return ""
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput(
            f"zone {_quote(zone)} is not a time zone zoneinfo knows (e.g. 'America/New_York', 'UTC')."
        ) from None
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_/-]*", zone):
        raise InvalidInput(
            f"zone {_quote(zone)} cannot be named in a lot id (letters, digits, _ - and / only); "
            "choose a geographic zone such as 'America/New_York'."
        )
    return zone


@functools.cache
def _tz(zone: str) -> datetime.tzinfo:
    return zoneinfo.ZoneInfo(zone) if zone else datetime.UTC


@dataclass(frozen=True)
class Interval:
    """A lot duration. A *fixed* interval (``minutes`` dividing a day, in UTC) has windows that never
    straddle midnight and is counted arithmetically; a *calendar* interval (``calendar``: ``W`` ISO
    weeks, ``M`` months, ``Y`` years; ``minutes`` is then its longest length) and any interval of a
    day or longer in a ``zone`` (a local day is 23, 24 or 25 hours) go through the calendar."""

    minutes: int
    calendar: str = ""
    #: The zone whose local days bound the lots (``""``: UTC); only for P1D and longer.
    zone: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.minutes, bool) or not isinstance(self.minutes, int):
            raise InvalidInput(f"interval minutes must be an integer, got {self.minutes!r}.")
        if self.calendar:
            if CALENDAR_MINUTES.get(self.calendar) != self.minutes:
                raise InvalidInput(f"calendar interval {self.calendar!r} is not one of W, M, Y.")
        else:
            _check_minutes(self.minutes, f"an interval of {self.minutes} minutes")
        if self.zone:
            if check_zone(self.zone) != self.zone:
                raise InvalidInput(f"zone {self.zone!r} is written '' (UTC is the default).")
            if self.minutes < MINUTES_PER_DAY:
                raise InvalidInput(
                    f"{self.duration} lots cannot have a zone: an hour or a minute is the same in every "
                    "zone; zones are for P1D, P1W, P1M and P1Y."
                )

    @classmethod
    def parse(cls, text: str, zone: str | None = None) -> Interval:
        """Parse a canonical duration (``PT5M``, ``PT1H``, ``P1D``, ``P1W``, ``P1M``, ``P1Y``), zoned as
        ``P1D[America/New_York]`` or by ``zone``; other spellings are refused."""
        if isinstance(text, str) and len(text) <= 100 and (zoned := _ZONED.fullmatch(text)):
            if zone is not None:
                raise InvalidInput(f"duration {_quote(text)} names its zone already.")
            text, zone = zoned.groups()
        match = _DURATION.fullmatch(text) if isinstance(text, str) and len(text) <= 16 else None
        if match is None:
            shown = _quote(text) if isinstance(text, str) else repr(text)
            raise InvalidInput(
                f"duration {shown} is not of the form {_FORMS} (upper case, e.g. 'PT5M', 'PT1H', 'P1M')."
            )
        minutes_text, unit, count_text, days_unit = match.groups()
        calendar = ""
        if count_text is not None:
            if days_unit != "D":
                if count_text != "1":
                    raise InvalidInput(f"duration {_quote(text)}: calendar intervals are P1W, P1M and P1Y.")
                calendar = days_unit
                minutes = CALENDAR_MINUTES[calendar]
            else:
                minutes = int(count_text) * MINUTES_PER_DAY
        else:
            minutes = int(minutes_text) * (60 if unit == "H" else 1)
        if not calendar:
            _check_minutes(minutes, f"duration {_quote(text)}")
        interval = cls(minutes, calendar, "" if zone is None else check_zone(zone))
        if interval.duration != text:
            raise InvalidInput(f"duration {_quote(text)} is not canonical; write '{interval.duration}'.")
        return interval

    @property
    def duration(self) -> str:
        """The ISO-8601 duration, without the zone: ``PT5M``, ``P1D``, ``P1M``."""
        if self.calendar:
            return f"P1{self.calendar}"
        if self.minutes == MINUTES_PER_DAY:
            return "P1D"
        if self.minutes % 60 == 0:
            return f"PT{self.minutes // 60}H"
        return f"PT{self.minutes}M"

    def __str__(self) -> str:
        return f"{self.duration}[{self.zone}]" if self.zone else self.duration

    @property
    def token(self) -> str:
        """What a lot id holds between its day and its ordinal: the duration, and a zone between
        dots (``P1D.America.New_York.``), so ids of one interval stay fixed-width and sortable."""
        return f"{self.duration}.{self.zone.replace('/', '.')}." if self.zone else self.duration

    @property
    def fixed(self) -> bool:
        """Whether lots are counted arithmetically: a UTC window that divides a day."""
        return not self.calendar and not self.zone

    @property
    def tzinfo(self) -> datetime.tzinfo:
        return _tz(self.zone)

    @property
    def windows_per_day(self) -> int:
        """Lots per id day: one for intervals of a day or longer."""
        return MINUTES_PER_DAY // self.minutes if not self.calendar else 1

    @property
    def ordinal_width(self) -> int:
        """Digits of the ordinal: 4 only when a day has more than 1000 windows (PT1M), else 3."""
        return 4 if self.windows_per_day > 1000 else 3

    @property
    def timedelta(self) -> datetime.timedelta:
        """The length of a fixed interval's lots (a calendar or zoned one's lots vary)."""
        if not self.fixed:
            raise InvalidInput(f"{self} lots have no fixed length.")
        return datetime.timedelta(minutes=self.minutes)


def _check_minutes(minutes: int, shown: str) -> None:
    if minutes <= 0:
        raise InvalidInput(f"{shown} is not positive; durations run from PT1M to PT12H, or P1D to P1Y.")
    if MINUTES_PER_DAY % minutes != 0:
        raise InvalidInput(
            f"{shown} does not divide a day (1440 minutes) evenly; "
            "allowed are PT1M..PT12H where the minutes divide 1440, P1D, P1W, P1M and P1Y."
        )


def _aligned(day: datetime.date, calendar: str) -> datetime.date:
    """The first day of the calendar lot that holds ``day`` (a Monday, a month's or a year's first)."""
    if calendar == "W":
        return day - datetime.timedelta(days=day.weekday())
    if calendar == "M":
        return day.replace(day=1)
    if calendar == "Y":
        return day.replace(month=1, day=1)
    return day


def day_index(day: datetime.date, interval: Interval) -> int:
    """``lot_index`` of the first lot of an id's ``day`` (for a calendar interval: the day's lot)."""
    if not interval.calendar:
        return day.toordinal() * interval.windows_per_day
    if interval.calendar == "W":
        return (day.toordinal() - 1) // 7  # 0001-01-01 is a Monday
    if interval.calendar == "M":
        return day.year * 12 + day.month - 1
    return day.year


def _index_day(index: int, interval: Interval) -> tuple[datetime.date, int]:
    """The first day of the calendar lot at ``index``, and its ordinal (0)."""
    if interval.calendar == "W":
        return datetime.date.fromordinal(index * 7 + 1), 0
    if interval.calendar == "M":
        year, month = divmod(index, 12)
        return datetime.date(year, month + 1, 1), 0
    return datetime.date(index, 1, 1), 0


@functools.total_ordering
@dataclass(frozen=True)
class IntervalLot:
    """One window of ``interval`` on a ``day`` (for a calendar interval: its first day); ordered by
    start time, then by duration."""

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
        if self.interval.calendar and _aligned(self.day, self.interval.calendar) != self.day:
            first = {"W": "a Monday", "M": "the first of a month", "Y": "January 1"}[self.interval.calendar]
            raise InvalidInput(f"a {self.interval.duration} lot starts on {first}, not on {self.day}.")

    @property
    def start(self) -> datetime.datetime:
        if self.interval.fixed:
            midnight = datetime.datetime.combine(self.day, datetime.time(), tzinfo=datetime.UTC)
            return midnight + self.ordinal * datetime.timedelta(minutes=self.interval.minutes)
        return _midnight(self.day, self.interval)

    @property
    def end(self) -> datetime.datetime:
        if self.interval.fixed:
            return self.start + datetime.timedelta(minutes=self.interval.minutes)
        return lot_from_index(lot_index(self) + 1, self.interval).start

    @property
    def local_start(self) -> datetime.datetime:
        """The start in the interval's zone (UTC when it has none)."""
        return self.start.astimezone(self.interval.tzinfo)

    @property
    def local_end(self) -> datetime.datetime:
        return self.end.astimezone(self.interval.tzinfo)

    def __str__(self) -> str:
        # Not strftime: it does not zero-pad years below 1000 on every platform.
        day = f"{self.day.year:04d}{self.day.month:02d}{self.day.day:02d}"
        return f"{day}{self.interval.token}{self.ordinal:0{self.interval.ordinal_width}d}"

    def _sort_key(self) -> tuple[datetime.date, int, int]:
        return (self.day, self.ordinal * self.interval.minutes, self.interval.minutes)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, IntervalLot):
            return NotImplemented
        return self._sort_key() < other._sort_key()


def _midnight(day: datetime.date, interval: Interval) -> datetime.datetime:
    """The UTC instant a local ``day`` begins (a midnight that a DST change skips: its first instant)."""
    local = datetime.datetime.combine(day, datetime.time(), tzinfo=interval.tzinfo)
    return local.astimezone(datetime.UTC)


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
    day_text, duration_text, zone_text, ordinal_text = match.groups()
    try:
        interval = Interval.parse(duration_text, None if zone_text is None else zone_text.replace(".", "/"))
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
        lot = IntervalLot(day, interval, int(ordinal_text))
    except InvalidInput as error:
        raise InvalidInput(f"lot id {_quote(text)}: {error.message}") from error
    if zone_text is not None and str(lot) != text:
        raise InvalidInput(f"lot id {_quote(text)} is not canonical; write '{lot}'.")
    return lot


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
    if not interval.fixed:
        local = instant.astimezone(interval.tzinfo).date()
        return IntervalLot(_aligned(local, interval.calendar), interval, 0)
    utc = instant.astimezone(datetime.UTC)
    return IntervalLot(utc.date(), interval, (utc.hour * 60 + utc.minute) // interval.minutes)


def lot_index(lot: IntervalLot) -> int:
    """Position of a lot among all lots of its interval (consecutive lots, consecutive indexes)."""
    if not lot.interval.calendar:  # the hot path (claims, reports of 525,600 lots): arithmetic only
        return lot.day.toordinal() * lot.interval.windows_per_day + lot.ordinal
    return day_index(lot.day, lot.interval)


def lot_from_index(index: int, interval: Interval) -> IntervalLot:
    if not interval.calendar:
        number, ordinal = divmod(index, interval.windows_per_day)
        return IntervalLot(datetime.date.fromordinal(number), interval, ordinal)
    day, ordinal = _index_day(index, interval)
    return IntervalLot(day, interval, ordinal)


def lots_between(start: datetime.datetime, end: datetime.datetime, interval: Interval) -> list[IntervalLot]:
    """The lots whose windows intersect ``[start, end)``, in time order; empty when ``start == end``."""
    first, last = lot_at(start, interval), lot_at(end, interval)
    if end < start:
        raise InvalidInput(f"end {end.isoformat()!r} is before start {start.isoformat()!r}.")
    if end == start:
        return []
    # The window starting exactly at ``end`` does not intersect the half-open range. Compared in UTC:
    # Python never finds an aware time in a repeated hour (01:30 on a fall-back night) equal to a
    # time of another zone.
    stop = lot_index(last) + (0 if last.start == end.astimezone(datetime.UTC) else 1)
    return [lot_from_index(i, interval) for i in range(lot_index(first), stop)]


#: The years over which a zone's offsets are checked against a finer interval (one sample a week).
_OFFSET_YEARS = range(1970, 2101)


@functools.cache
def _offsets_divide(zone: str, minutes: int) -> bool:
    """Whether every UTC offset the zone has from 1970 to 2100 (sampled weekly: every offset lasts
    longer) is a whole number of ``minutes``, so that its local days start on a lot boundary."""
    tz = zoneinfo.ZoneInfo(zone)
    moment = datetime.datetime(_OFFSET_YEARS[0], 1, 1, tzinfo=datetime.UTC)
    stop = datetime.datetime(_OFFSET_YEARS[-1], 12, 31, tzinfo=datetime.UTC)
    seen: set[datetime.timedelta] = set()
    while moment < stop:
        offset = moment.astimezone(tz).utcoffset()
        if offset is not None and offset not in seen:
            seen.add(offset)
            if offset.total_seconds() % (minutes * 60):
                return False
        moment += datetime.timedelta(days=7)
    return True


def check_tiles(fine: Interval, coarse: Interval) -> None:
    """Refuse, in one line, a mapping whose ``fine`` lots do not tile every ``coarse`` lot exactly."""
    if fine.fixed and coarse.fixed:
        _fixed_ratio(fine, coarse)
        return
    if fine.minutes > coarse.minutes:
        raise InvalidInput(f"input interval {fine} is coarser than output interval {coarse}.")
    if fine.minutes < MINUTES_PER_DAY:  # minutes or hours (always UTC) into days or longer
        if coarse.zone and not _offsets_divide(coarse.zone, fine.minutes):
            raise InvalidInput(
                f"input interval {fine} does not tile {coarse}: {coarse.zone}'s local days do not start "
                f"on a {fine} boundary."
            )
        return
    if fine.zone != coarse.zone:
        raise InvalidInput(
            f"input interval {fine} does not tile output interval {coarse}: days in "
            f"{fine.zone or 'UTC'} are not days in {coarse.zone or 'UTC'}."
        )
    if fine.calendar == "W" and coarse.calendar in ("M", "Y"):
        raise InvalidInput(
            f"input interval {fine} does not tile output interval {coarse}: a week may straddle "
            f"{'months' if coarse.calendar == 'M' else 'years'}."
        )
    # What is left tiles: a day into anything as long, a month into a year, an interval into itself.


def _fixed_ratio(fine: Interval, coarse: Interval) -> int:
    """How many ``fine`` windows make one ``coarse`` window; both divide a day, so they are aligned."""
    if fine.minutes > coarse.minutes:
        raise InvalidInput(f"input interval {fine} is coarser than output interval {coarse}.")
    if coarse.minutes % fine.minutes != 0:
        raise InvalidInput(f"input interval {fine} does not divide output interval {coarse} evenly.")
    return coarse.minutes // fine.minutes


def covered_indexes(first: int, stop: int, fine: Interval, coarse: Interval) -> tuple[int, int]:
    """The ``fine`` lot indexes ``[lo, hi)`` that make up the ``coarse`` lots ``[first, stop)``."""
    if fine.fixed and coarse.fixed:
        ratio = coarse.minutes // fine.minutes
        return first * ratio, stop * ratio
    return (
        lot_index(lot_at(lot_from_index(first, coarse).start, fine)),
        lot_index(lot_at(lot_from_index(stop, coarse).start, fine)),
    )


def covering_index(index: int, fine: Interval, coarse: Interval) -> int:
    """The index of the ``coarse`` lot that holds the ``fine`` lot at ``index``."""
    if fine.fixed and coarse.fixed:
        return index // (coarse.minutes // fine.minutes)
    return lot_index(lot_at(lot_from_index(index, fine).start, coarse))


def input_lots_for(output_lot: IntervalLot, input_interval: Interval) -> list[IntervalLot]:
    """The finer input lots that together make up ``output_lot``, in time order."""
    if input_interval.fixed and output_lot.interval.fixed:  # the claims' path: arithmetic only
        count = _fixed_ratio(input_interval, output_lot.interval)
        first = output_lot.ordinal * count
        return [IntervalLot(output_lot.day, input_interval, first + i) for i in range(count)]
    check_tiles(input_interval, output_lot.interval)
    index = lot_index(output_lot)
    first, stop = covered_indexes(index, index + 1, input_interval, output_lot.interval)
    return [lot_from_index(i, input_interval) for i in range(first, stop)]


def output_lot_for(input_lot: IntervalLot, output_interval: Interval) -> IntervalLot:
    """The coarser output lot that contains ``input_lot``."""
    if input_lot.interval.fixed and output_interval.fixed:
        count = _fixed_ratio(input_lot.interval, output_interval)
        return IntervalLot(input_lot.day, output_interval, input_lot.ordinal // count)
    check_tiles(input_lot.interval, output_interval)
    index = covering_index(lot_index(input_lot), input_lot.interval, output_interval)
    return lot_from_index(index, output_interval)
