"""Sample web access logs for the demo and the overhead benchmark: one file per five minutes, in
Common Log Format, reproducible from a seed."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

FIVE_MINUTES = timedelta(minutes=5)
PATHS = (
    "/",
    "/index.html",
    "/search",
    "/cart",
    "/checkout",
    "/api/items",
    "/api/items/42",
    "/login",
    "/logout",
    "/static/app.js",
    "/static/app.css",
    "/images/logo.png",
)
STATUSES = (200, 200, 200, 200, 200, 200, 304, 301, 404, 500)
METHODS = ("GET", "GET", "GET", "GET", "POST")
#: What a broken sender writes: a line cut in the middle.
MALFORMED_LINE = "10.0.0.7 - - [garbled"


@dataclass(frozen=True)
class LandingFile:
    path: Path
    window_start: datetime
    lines: int


def landing_path(landing: Path, window_start: datetime) -> Path:
    """``<landing>/YYYY/MM/DD/HHMM.log``: the window's start in the path, as many senders do."""
    return landing / window_start.strftime("%Y/%m/%d/%H%M.log")


def log_lines(window_start: datetime, count: int, rng: random.Random) -> list[str]:
    lines = []
    for _ in range(count):
        at = window_start + timedelta(seconds=rng.uniform(0, FIVE_MINUTES.total_seconds() - 1))
        ip = f"10.0.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        method, path, status = rng.choice(METHODS), rng.choice(PATHS), rng.choice(STATUSES)
        size = rng.randrange(200, 50_000) if status != 304 else 0
        stamp = at.strftime("%d/%b/%Y:%H:%M:%S +0000")
        lines.append(f'{ip} - - [{stamp}] "{method} {path} HTTP/1.1" {status} {size}')
    lines.sort(key=lambda line: line.split("[", 1)[1])
    return lines


def write_access_logs(
    landing: Path,
    start: datetime,
    windows: int,
    *,
    empty: frozenset[int] = frozenset(),
    malformed: frozenset[int] = frozenset(),
    lines_per_file: int = 200,
    seed: int = 7,
) -> list[LandingFile]:
    """Write ``windows`` five-minute files from ``start`` (UTC, on a five-minute boundary); the
    windows numbered in ``empty`` get no file, those in ``malformed`` one broken line."""
    if start.tzinfo is None or start.astimezone(UTC).minute % 5 or start.second or start.microsecond:
        raise ValueError(f"start must be an aware time on a five-minute boundary, got {start!r}")
    rng = random.Random(seed)
    written = []
    for index in range(windows):
        window_start = start.astimezone(UTC) + index * FIVE_MINUTES
        lines = log_lines(window_start, lines_per_file, rng)
        if index in empty:
            continue
        if index in malformed:
            lines.insert(len(lines) // 2, MALFORMED_LINE)
        path = landing_path(landing, window_start)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written.append(LandingFile(path, window_start, len(lines)))
    return written


def repair(file: LandingFile) -> None:
    """What the sender does once told: send the file again without the broken line."""
    text = file.path.read_text(encoding="utf-8")
    file.path.write_text(text.replace(MALFORMED_LINE + "\n", ""), encoding="utf-8")
