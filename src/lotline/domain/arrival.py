"""Arrival policies (SPEC §5 "Absence and freshness"): when a source's lot is due, and what it
means once it is due and nothing was delivered.

A source dataset's lots are delivered by a sender (``lotline ingest``, another tool). Each source
has a policy: a **lateness window** (``late_after``: how long after an interval ends its data may
still arrive) and what **absence** means once that window has passed: ``missing`` (the default:
every interval must deliver at least one object; a header-only file or an empty marker counts) or
``empty`` (a source that legitimately sends nothing in quiet intervals: the interval is declared
empty *by the policy*, and recorded as such). A lot is *due* once its end plus the window lies
before now; lots not yet due are *pending*, never trouble.

Empty lots are always declared by someone, and the manifest records who (``declared_by``): the
sender's marker object, an operator's ``lotline ingest --empty``, or the policy.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from enum import StrEnum

from lotline.domain.errors import InvalidInput
from lotline.domain.lots import Interval, IntervalLot, parse_lot

#: ISO-8601 durations of days, hours, minutes and seconds (``PT15M``, ``P1DT2H``, ``PT0S``); years,
#: months and weeks have no fixed length and are refused.
_ISO_DURATION = re.compile(
    r"P(?:(?P<days>[0-9]+)D)?(?:T(?:(?P<hours>[0-9]+)H)?(?:(?P<minutes>[0-9]+)M)?(?:(?P<seconds>[0-9]+)S)?)?"
)
#: The longest lateness window a policy may have.
MAX_LATE_AFTER = datetime.timedelta(days=366)
#: A sender's empty declaration: an object named ``_EMPTY.<lot id>`` anywhere in the landing.
EMPTY_MARKER = "_EMPTY"


class Absence(StrEnum):
    """What a due lot that nothing was delivered for is."""

    MISSING = "missing"
    EMPTY = "empty"


def parse_duration(label: str, text: str) -> datetime.timedelta:
    """An ISO-8601 duration of days, hours, minutes and seconds; negative or malformed is refused."""
    match = _ISO_DURATION.fullmatch(text) if isinstance(text, str) and len(text) <= 32 else None
    if match is None or text in ("P", "PT") or text.endswith("T"):
        raise InvalidInput(
            f"{label} {text!r} is not a non-negative ISO-8601 duration of days, hours, minutes or "
            "seconds (e.g. PT15M, PT2H, P1D, PT0S)."
        )
    parts = {name: int(value or 0) for name, value in match.groupdict().items()}
    found = datetime.timedelta(**parts)
    if found > MAX_LATE_AFTER:
        raise InvalidInput(f"{label} {text!r} is longer than {MAX_LATE_AFTER.days} days.")
    return found


def format_duration(value: datetime.timedelta) -> str:
    """The ISO-8601 form ``parse_duration`` reads back (``PT15M``, ``P1DT2H``, ``PT0S``)."""
    seconds = int(value.total_seconds())
    days, seconds = divmod(seconds, 86_400)
    hours, seconds = divmod(seconds, 3_600)
    minutes, seconds = divmod(seconds, 60)
    time = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M"), (seconds, "S")) if n)
    text = "P" + (f"{days}D" if days else "") + (f"T{time}" if time else "")
    return "PT0S" if text == "P" else text


@dataclass(frozen=True)
class ArrivalPolicy:
    late_after: datetime.timedelta = datetime.timedelta(minutes=5)
    absent: Absence = Absence.MISSING

    @classmethod
    def parse(cls, late_after: str | None = None, absent: str | None = None) -> ArrivalPolicy:
        """From the declared texts; a text left out keeps the default."""
        policy = cls()
        if late_after is not None:
            policy = cls(parse_duration("late_after", late_after), policy.absent)
        if absent is not None:
            if absent not in {a.value for a in Absence}:
                raise InvalidInput(f"absent {absent!r} is not one of missing, empty.")
            policy = cls(policy.late_after, Absence(absent))
        return policy

    def due(self, lot: IntervalLot, now: datetime.datetime) -> bool:
        return lot.end + self.late_after <= now

    def due_until(self, now: datetime.datetime) -> datetime.datetime:
        """Lots that end at or before this instant are due."""
        return now - self.late_after

    @property
    def declaration(self) -> str:
        """Who declared a lot empty when this policy did."""
        return f"arrival policy (absent=empty, late_after={format_duration(self.late_after)})"

    def to_json(self) -> dict[str, str]:
        return {"lateAfter": format_duration(self.late_after), "absent": self.absent.value}


DEFAULT_POLICY = ArrivalPolicy()


def marker_lot(name: str, interval: Interval) -> str:
    """The lot a marker object's file name ``_EMPTY.<lot id>`` declares empty; one line when the id
    does not parse or is of another interval."""
    suffix = name.removeprefix(EMPTY_MARKER + ".")
    try:
        lot = parse_lot(suffix) if suffix != name else None
    except InvalidInput as error:
        raise InvalidInput(f"empty marker {name!r}: {error.message}") from None
    if not isinstance(lot, IntervalLot):
        raise InvalidInput(
            f"empty marker {name!r} does not name an interval lot: write {EMPTY_MARKER}.<lot id>, "
            f"e.g. {EMPTY_MARKER}.20260101{interval}000."
        )
    if lot.interval != interval:
        raise InvalidInput(
            f"empty marker {name!r} names a {lot.interval} lot; this dataset has {interval} lots."
        )
    return str(lot)


def is_marker(name: str) -> bool:
    return name == EMPTY_MARKER or name.startswith(EMPTY_MARKER + ".")
