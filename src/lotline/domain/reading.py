"""What a reader outside lotline reads (SPEC §5, "Reading outside lotline"): the READY lots of a
dataset whose windows meet a time range, each by the objects its current manifest lists.

A dataset's folder also holds the objects of superseded and failed attempts (``lot=L/attempt=1``
beside ``attempt=2``); a reader that listed it would read them too. Readers take these lists.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from dataclasses import dataclass

from lotline.domain.errors import InvalidInput
from lotline.domain.gaps import parse_time
from lotline.domain.lots import IntervalLot, parse_lot
from lotline.domain.manifests import Manifest, ManifestObject

#: ``from_``/``to`` of a reader: an aware datetime, an RFC 3339 instant or a date, or None (open).
TimeBound = datetime.datetime | str | None


@dataclass(frozen=True)
class ReadRange:
    """``[start, end)``, either side open (None). A lot belongs to it when its window meets it;
    named lots have no window, so only a range open on both sides has them."""

    start: datetime.datetime | None = None
    end: datetime.datetime | None = None

    @classmethod
    def parse(cls, start: TimeBound, end: TimeBound) -> ReadRange:
        found = cls(_bound("from", start), _bound("to", end))
        if found.start is not None and found.end is not None and found.end <= found.start:
            raise InvalidInput(f"from {_shown(start)} must be before to {_shown(end)}.")
        return found

    @property
    def is_open(self) -> bool:
        return self.start is None and self.end is None

    def id_bounds(self) -> tuple[str | None, str | None]:
        """Bounds on lot ids, ``[low, high)`` as strings, that every interval lot meeting the range
        satisfies: an interval lot id starts with its day (``yyyyMMdd``), so the store narrows by
        id (an index range) and ``holds`` decides exactly."""
        low = None if self.start is None else f"{self.start:%Y%m%d}"
        high = None
        if self.end is not None:
            last = (self.end - datetime.timedelta(microseconds=1)).date() + datetime.timedelta(days=1)
            high = f"{last.year:04d}{last.month:02d}{last.day:02d}"
        return low, high

    def holds(self, lot: str) -> bool:
        if self.is_open:
            return True
        parsed = parse_lot(lot)
        if not isinstance(parsed, IntervalLot):
            return False
        before_end = self.end is None or parsed.start < self.end
        return before_end and (self.start is None or parsed.end > self.start)


def _bound(label: str, value: TimeBound) -> datetime.datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise InvalidInput(f"{label} {value.isoformat()} has no time zone; give an aware time (UTC).")
        return value.astimezone(datetime.UTC)
    return parse_time(label, value)


def _shown(value: TimeBound) -> str:
    return repr(value.isoformat() if isinstance(value, datetime.datetime) else value)


@dataclass(frozen=True)
class Published:
    """The READY lots of a dataset in a range, each with its current manifest (complete or empty),
    in lot order; ``sample`` is an object of the dataset's newest lot with data when none of these
    has any (its columns are the dataset's, for a reader that must return no rows)."""

    namespace: str
    dataset: str
    range: ReadRange
    manifests: tuple[Manifest, ...]
    sample: ManifestObject | None = None

    def objects(self) -> Iterator[tuple[str, ManifestObject]]:
        """(lot, object) for every object of every lot: an empty lot has none."""
        for manifest in self.manifests:
            for found in manifest.objects:
                yield manifest.lot, found

    @property
    def rows(self) -> int:
        """Rows of the lots as their manifests count them (None counts as 0)."""
        return sum(m.row_count or 0 for m in self.manifests)

    def format(self) -> str | None:
        """The one format of the objects (or of ``sample``); a mix cannot be one frame."""
        formats = {o.format for _, o in self.objects()} or ({self.sample.format} if self.sample else set())
        if len(formats) > 1:
            raise InvalidInput(
                f"{self.dataset}: its lots' objects are of several formats ({', '.join(sorted(formats))}); "
                "read them by range, one format at a time (lotline files lists each object's format)."
            )
        return next(iter(formats), None)


def check_lot_column(name: object, columns: list[str]) -> str:
    """The name of the column a reader adds with each row's lot: a new column's name."""
    if not isinstance(name, str) or not name.strip() or "`" in name:
        raise InvalidInput(f"lot_column {name!r} is not a column name.")
    if name in columns:
        raise InvalidInput(f"lot_column {name!r} is a column of the dataset already; choose another name.")
    return name


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_table_name(name: object) -> str:
    """A catalog table's name: ``table`` or ``database.table``, each an unquoted identifier (what
    every metastore takes)."""
    parts = name.split(".") if isinstance(name, str) else []
    if not 1 <= len(parts) <= 2 or not all(_IDENTIFIER.fullmatch(p) for p in parts):
        raise InvalidInput(
            f"table {name!r} is not a table name: write table or database.table, each a letter or _ "
            "then letters, digits or _."
        )
    return str(name)
