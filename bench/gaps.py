"""How long does a gap report of five-minute lots take, with its list? Next to one plain SQL query.

    .venv/bin/python -m bench.gaps [--years 1] [--repeat 20] [--backends postgresql,sqlite]
                                    [--keep NAME]

A fresh database gets a chain of 10 registered jobs (``j0`` makes ``d0`` from nothing, ``jN`` reads
``d(N-1)`` and makes ``dN``) and ``--years`` of PT5M lots for each from 2023-01-01 (a year: 105,120
lots per job, ~2.1 million rows; ``--years 5``: 525,600 lots per job, ~10.5 million rows), seeded
set-based (``bench/_seed.py``: ``INSERT … SELECT`` over ``generate_series``), as lotline leaves them
after successful claims. The last job's lots have gaps of every kind: scattered missing lots,
failures (each with its FAILED run and reason, so the report reads the reasons), a reopened day, a
held hour, running lots, and lots blocked by failed or missing lots of its input.

Measured: ``GapService.report`` of ``j9`` over the whole range (counts and the runs of lots not
complete, the input checked for blocked lots), median of ``--repeat`` calls after two warm-ups; the
baseline is one hand-written statement over the same rows in the same run: counts by status of the
dataset's OUTPUT rows in the lot range (no missing, no list). PostgreSQL is reached at
LOTLINE_TEST_PG_URL (default postgres@127.0.0.1:5432); the benchmark creates and drops its own
database (``--keep NAME``: seeds the PostgreSQL database NAME once and reuses it later). Target
(issue 31): the report under 500 ms on PostgreSQL at five years.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench._seed import DAY0, NS, PER_DAY, lot, seed_chain, seeded_chain
from bench._server import fresh_database, kept_database
from lotline.services import Lineage
from lotline.store.engine import Store

JOBS = 10
YEAR_DAYS = 365
TARGET_MS = {1: 200.0, 5: 500.0}
KEEP_HELP = (
    "PostgreSQL: seed the database NAME once and keep it (reused as seeded by a later run; seed it"
    " with bench.grid, whose database adds the manifests, and pass the same --years)"
)


def days_of(years: int) -> int:
    return YEAR_DAYS * years


def span(days: int) -> dict[str, str]:
    """The report's range: every seeded day."""
    return {"start": DAY0.isoformat(), "end": (DAY0 + dt.timedelta(days=days)).isoformat()}


def machine() -> str:
    """What the figures were measured on, to print beside them: CPUs and load average."""
    one, five, fifteen = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {one:.2f} {five:.2f} {fifteen:.2f}"


def median_ms(call: Callable[[], object], repeat: int) -> float:
    for _ in range(2):
        call()
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return 1000 * statistics.median(times)


@contextmanager
def database(backend: str, label: str, keep: str | None = None) -> Iterator[str]:
    """A fresh migrated database of ``backend``, removed afterwards; ``keep``: the PostgreSQL
    database of that name, kept (and seeded only if it is new)."""
    if backend == "postgresql" and keep is not None:
        yield kept_database(keep)
        return
    if backend == "postgresql":
        with fresh_database(label) as url:
            yield url
        return
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp, 'lotline.db')}"
        Store(url).upgrade()
        yield url


def plain_count(lineage: Lineage, dataset_id: Any, days: int) -> Callable[[], object]:
    """The baseline: counts by status of the dataset's OUTPUT rows in the range, one statement."""
    statement = sa.text(
        "SELECT status, count(*) FROM data_status WHERE dataset_id = :d AND role = 'OUTPUT'"
        " AND lot >= :a AND lot <= :b GROUP BY status"
    ).bindparams(sa.bindparam("d", type_=sa.Uuid()))  # a UUID as each database stores it
    bounds = {"d": dataset_id, "a": lot(0, 0), "b": lot(days - 1, PER_DAY - 1)}

    def plain() -> object:
        with lineage.store.read() as connection:
            return connection.execute(statement, bounds).all()

    return plain


def measure(url: str, days: int, repeat: int) -> dict[str, Any]:
    chain = seeded_chain(url) or seed_chain(url, JOBS, days)
    lineage = Lineage.over(Store(url))

    def report() -> Any:
        return lineage.gaps.report(NS, job=f"j{JOBS - 1}", **span(days))

    report_ms = median_ms(report, repeat)
    plain_ms = median_ms(plain_count(lineage, chain.datasets[f"d{JOBS - 1}"], days), repeat)
    found = report()
    counts = ", ".join(f"{s.value} {n}" for s, n in found.counts.items() if n)
    reasons = sum(1 for r in found.runs if r.failure is not None and r.failure.reason)
    lineage.close()
    return {
        "seeded": f"{chain.rows} rows in {chain.seconds:.0f} s",
        "report": report_ms,
        "plain": plain_ms,
        "found": f"{found.total} lots: {counts}; {len(found.runs)} runs, {reasons} with a failure reason",
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--years", type=int, default=1, help="years of lots per job (1 or 5; default 1)")
    parser.add_argument("--repeat", type=int, default=20, help="measured calls (median; default 20)")
    parser.add_argument("--backends", default="postgresql,sqlite", help="default postgresql,sqlite")
    parser.add_argument("--keep", metavar="NAME", help=KEEP_HELP)
    args = parser.parse_args()
    days = days_of(args.years)
    now = dt.datetime.now(dt.UTC)
    print(
        f"gap report bench, {args.years} year(s) of PT5M lots ({days * PER_DAY} per job) x {JOBS} jobs, "
        f"{now:%Y-%m-%d %H:%M} UTC, {machine()}",
        flush=True,
    )
    target = TARGET_MS.get(args.years)
    for backend in args.backends.split(","):
        with database(backend, "gaps", args.keep) as url:
            found = measure(url, days, args.repeat)
        verdict = ""
        if backend == "postgresql" and target is not None:
            verdict = f"; target < {target:.0f} ms {'met' if found['report'] < target else 'MISSED'}"
        print(f"{backend:10} seeded {found['seeded']}; report {found['found']}", flush=True)
        print(
            f"{backend:10} report with its list {found['report']:7.1f} ms, "
            f"one plain SQL count {found['plain']:7.1f} ms, "
            f"ratio {found['report'] / found['plain']:5.2f}x{verdict}; {machine()}",
            flush=True,
        )


if __name__ == "__main__":
    main()
