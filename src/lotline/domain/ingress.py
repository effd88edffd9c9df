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

from lotline.domain.arrival import Absence, ArrivalPolicy, marker_lot
from lotline.domain.errors import InvalidInput
from lotline.domain.lots import Interval, IntervalLot, lot_at, lots_between, parse_lot

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
    EMPTY = "empty"  # closed with no file and declared empty (a marker, the policy): register it empty
    MISSING = "missing"  # closed with nothing delivered, and the policy says missing: register nothing
    CHANGED = "changed"  # registered, and what landed differs (late or corrected): a new version
    UNCHANGED = "unchanged"
    OPEN = "open"  # the interval (plus lateness) has not closed yet: wait


@dataclass(frozen=True)
class LotPlan:
    lot: str
    change: LotChange
    files: tuple[LandedFile, ...]
    digest: str
    #: An empty lot: who declares it empty (a marker's path, the policy).
    declared_by: str | None = None


@dataclass
class Scan:
    """A landing scan sorted into lots, and the files that could not be placed."""

    by_lot: dict[IntervalLot, list[LandedFile]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    #: Lots the sender declared empty with a marker object: lot id -> the marker's path.
    markers: dict[str, str] = field(default_factory=dict)


def sort_into_lots(
    files: Iterable[LandedFile], rule: TimeRule, interval: Interval, markers: Iterable[str] = ()
) -> Scan:
    """Files into the lots their times fall in; ``markers``: the relative paths of empty markers
    (``_EMPTY.<lot id>``), each naming its lot. A marker that does not name a lot of ``interval``,
    or names a lot that also has files, is refused (InvalidInput): nothing is registered."""
    scan = Scan()
    for path in markers:
        scan.markers[marker_lot(path.rsplit("/", 1)[-1], interval)] = path
    for f in files:
        try:
            at = rule.time_of(f.relative_path, f.modified_at)
        except InvalidInput as reason:
            scan.skipped.append(reason.message)
            continue
        scan.by_lot.setdefault(lot_at(at, interval), []).append(f)
    for lot, files_of in scan.by_lot.items():
        if str(lot) in scan.markers:
            raise InvalidInput(
                f"empty marker {scan.markers[str(lot)]} declares lot {lot} empty, but "
                f"{files_of[0].relative_path} holds data for it: remove one of them; nothing was registered."
            )
    return scan


def plan_lots(
    scan: Scan,
    lots: Sequence[IntervalLot],
    registered: Mapping[str, str | None],
    *,
    now: datetime,
    policy: ArrivalPolicy,
) -> list[LotPlan]:
    """What to do with each of ``lots``. ``registered`` maps a lot to the digest its readable
    manifest was registered with (None: registered without one, e.g. by another tool). A lot
    closed with nothing delivered is empty only when declared so (a marker, or the policy's
    ``absent=empty``); otherwise it is missing and nothing is registered (SPEC §5)."""
    plans = []
    for lot in lots:
        files = tuple(sorted(scan.by_lot.get(lot, ()), key=lambda f: f.uri))
        landed = digest(files)
        declared = None if files else _declared_empty(scan, str(lot), policy)
        if not policy.due(lot, now):
            change = LotChange.OPEN
        elif str(lot) not in registered:
            change = LotChange.NEW if files else LotChange.MISSING if declared is None else LotChange.EMPTY
        elif registered[str(lot)] == landed:
            change = LotChange.UNCHANGED
        else:
            change = LotChange.CHANGED
            if declared is None and not files:  # every file of a registered lot was removed
                declared = "the sender (every file of the lot was removed from the landing)"
        plans.append(LotPlan(str(lot), change, files, landed, declared))
    return plans


def _declared_empty(scan: Scan, lot: str, policy: ArrivalPolicy) -> str | None:
    """Who declares a lot with no file empty: the sender's marker, else an ``absent=empty`` policy."""
    marker = scan.markers.get(lot)
    if marker is not None:
        return f"the sender's marker {marker}"
    return policy.declaration if policy.absent is Absence.EMPTY else None


def parse_start(lot: str) -> datetime:
    """The start of an interval lot id that a marker named (checked by ``marker_lot``)."""
    parsed = parse_lot(lot)
    if not isinstance(parsed, IntervalLot):
        raise InvalidInput(f"{lot!r} is not an interval lot.")
    return parsed.start


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
    that has a file or a marker. A range only says which intervals to look at: those without a file
    follow the arrival policy (it declares nothing empty by itself)."""
    check_range(start, end)
    if start is not None and end is not None:
        return lots_between(start, end, interval)
    found = [*scan.by_lot, *(lot_at(parse_start(lot), interval) for lot in scan.markers)]
    if not found:
        return []
    return lots_between(min(found).start, max(found).end, interval)
