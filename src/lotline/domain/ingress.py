"""Ingress rules (SPEC §5 "Ingress"): which lot a landing file belongs to, which lots are closed,
and what a scan of the landing location means for each lot — pure, so every case is testable
without storage or a database.

A lot is identified with what landed for it by a *digest* of its files (uri, size, modified
time): the digest is recorded with the lot's manifest, so a later scan that finds the same files
changes nothing (ingest is idempotent), and one that finds a file more (late data), a file
replaced or a file gone (a corrected lot) gives the lot a new version.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from lotline.domain.errors import InvalidInput
from lotline.domain.lots import Interval, IntervalLot, lot_at, lots_between

#: Named groups a ``path:`` pattern may use; year, month and day are required unless ``ts`` is used.
TIME_GROUPS = ("year", "month", "day", "hour", "minute", "second")
DIGEST_PREFIX = "landing digest "
#: The format a file's extension says (``lotline ingest`` without ``--format`` on a new dataset).
EXTENSION_FORMATS = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
}
DEFAULT_FORMAT = "text"


def format_of(paths: Iterable[str]) -> str:
    """The format most of the files' extensions say (``.csv`` csv …), else text; a compression
    suffix (``.gz``, ``.bz2``) is looked through, as Spark reads those files."""
    counts: dict[str, int] = {}
    for path in paths:
        name = path.rsplit("/", 1)[-1].lower()
        for suffix in (".gz", ".bz2", ".snappy", ".zst"):
            name = name.removesuffix(suffix)
        dot = name.rfind(".")
        found = EXTENSION_FORMATS.get(name[dot:], DEFAULT_FORMAT) if dot > 0 else DEFAULT_FORMAT
        counts[found] = counts.get(found, 0) + 1
    return max(counts, key=lambda f: counts[f]) if counts else DEFAULT_FORMAT


@dataclass(frozen=True)
class TimeRule:
    """How a landing file's time is found: its modification time, or a timestamp in its path."""

    pattern: re.Pattern[str] | None = None

    @classmethod
    def parse(cls, text: str) -> TimeRule:
        """``mtime`` or ``path:REGEX`` whose named groups are ``year``, ``month``, ``day`` (and
        optionally ``hour``, ``minute``, ``second``), or one group ``ts`` holding an ISO time."""
        if text == "mtime":
            return cls()
        if not text.startswith("path:"):
            raise InvalidInput(f"--time must be 'mtime' or 'path:REGEX', got {text!r}.")
        try:
            pattern = re.compile(text[len("path:") :])
        except re.error as error:
            raise InvalidInput(f"--time pattern {text[5:]!r} is not a regular expression: {error}.") from None
        groups = set(pattern.groupindex)
        if "ts" not in groups and not {"year", "month", "day"} <= groups:
            raise InvalidInput(
                "--time pattern needs named groups year, month and day (hour, minute, second "
                "optional), or one group ts with an ISO time, e.g. "
                "path:(?P<year>\\d{4})/(?P<month>\\d\\d)/(?P<day>\\d\\d)."
            )
        unknown = groups - {*TIME_GROUPS, "ts"}
        if unknown:
            raise InvalidInput(
                f"--time pattern has unknown groups {sorted(unknown)}; use {list(TIME_GROUPS)}."
            )
        return cls(pattern)

    def time_of(self, relative_path: str, modified_at: datetime) -> datetime:
        """The file's time (UTC); InvalidInput naming the file when its path does not say it."""
        if self.pattern is None:
            return modified_at.astimezone(UTC)
        match = self.pattern.search(relative_path)
        if match is None:
            raise InvalidInput(f"{relative_path}: the path does not match the --time pattern.")
        found = match.groupdict()
        try:
            if found.get("ts"):
                parsed = datetime.fromisoformat(found["ts"])
                return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
            year, month, day, hour, minute, second = (int(found.get(n) or 0) for n in TIME_GROUPS)
            return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
        except (TypeError, ValueError) as error:
            raise InvalidInput(f"{relative_path}: no valid time in the path ({error}).") from None


@dataclass(frozen=True)
class LandedFile:
    uri: str
    relative_path: str
    size: int
    modified_at: datetime


def digest(files: Iterable[LandedFile]) -> str:
    """What landed for a lot, in one string: equal exactly when the same files, unchanged, are there."""
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.uri):
        h.update(f"{f.uri}\0{f.size}\0{f.modified_at.isoformat()}\n".encode())
    return DIGEST_PREFIX + h.hexdigest()


class LotChange(StrEnum):
    NEW = "new"  # never registered: register it
    EMPTY = "empty"  # closed with no file: register it empty
    CHANGED = "changed"  # registered, and what landed differs (late or corrected): a new version
    UNCHANGED = "unchanged"
    OPEN = "open"  # the interval (plus lateness) has not closed yet: wait


@dataclass(frozen=True)
class LotPlan:
    lot: str
    change: LotChange
    files: tuple[LandedFile, ...]
    digest: str


@dataclass
class Scan:
    """A landing scan sorted into lots, and the files that could not be placed."""

    by_lot: dict[IntervalLot, list[LandedFile]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def sort_into_lots(files: Iterable[LandedFile], rule: TimeRule, interval: Interval) -> Scan:
    scan = Scan()
    for f in files:
        try:
            at = rule.time_of(f.relative_path, f.modified_at)
        except InvalidInput as reason:
            scan.skipped.append(reason.message)
            continue
        scan.by_lot.setdefault(lot_at(at, interval), []).append(f)
    return scan


def plan_lots(
    scan: Scan,
    lots: Sequence[IntervalLot],
    registered: Mapping[str, str | None],
    *,
    now: datetime,
    lateness: timedelta,
) -> list[LotPlan]:
    """What to do with each of ``lots``. ``registered`` maps a lot to the digest its readable
    manifest was registered with (None: registered without one, e.g. by another tool)."""
    plans = []
    for lot in lots:
        files = tuple(sorted(scan.by_lot.get(lot, ()), key=lambda f: f.uri))
        landed = digest(files)
        if lot.end + lateness > now:
            change = LotChange.OPEN
        elif str(lot) not in registered:
            change = LotChange.NEW if files else LotChange.EMPTY
        elif registered[str(lot)] == landed:
            change = LotChange.UNCHANGED
        else:
            change = LotChange.CHANGED
        plans.append(LotPlan(str(lot), change, files, landed))
    return plans


def check_range(start: datetime | None, end: datetime | None) -> None:
    """``--from``/``--to``: both or neither, in order, at most ten years apart."""
    if (start is None) != (end is None):
        raise InvalidInput("--from and --to go together.")
    if start is not None and end is not None:
        if end <= start:
            raise InvalidInput(f"--to {end.isoformat()} is not after --from {start.isoformat()}.")
        if end - start > timedelta(days=3660):
            raise InvalidInput("--from/--to may span at most ten years.")


def lot_range(
    scan: Scan, interval: Interval, start: datetime | None, end: datetime | None
) -> list[IntervalLot]:
    """The lots a scan covers: those of [start, end) if given, else from the first to the last lot
    that has a file."""
    check_range(start, end)
    if start is not None and end is not None:
        return lots_between(start, end, interval)
    if not scan.by_lot:
        return []
    return lots_between(min(scan.by_lot).start, max(scan.by_lot).end, interval)
