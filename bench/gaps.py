"""How long does a one-year gap report of five-minute lots take, with its list? Next to one plain SQL query.

    .venv/bin/python -m bench.gaps [--repeat 20] [--backends postgresql,sqlite]

A fresh database gets a chain of 10 registered jobs (``j0`` makes ``d0`` from nothing, ``jN`` reads
``d(N-1)`` and makes ``dN``) and one year (2023) of PT5M lots for each: 105,120 OUTPUT rows per
dataset and the consumers' INPUT rows, ~2.1 million rows, written with bulk inserts (as lotline
leaves them after successful claims, without the runs: the benchmark measures the report, not
claiming). The last job's lots have gaps of every kind: scattered missing lots, failures, a reopened
day, a held run, running lots, and lots blocked by failed or missing lots of its input.

Measured: ``GapService.report`` of ``j9`` over the year (counts and the runs of lots not complete,
the input checked for blocked lots), median of ``--repeat`` calls after two warm-ups; the baseline is
one hand-written statement over the same rows in the same run: counts by status of the dataset's
OUTPUT rows in the lot range (no missing, no list). PostgreSQL is reached at LOTLINE_TEST_PG_URL
(default postgres@127.0.0.1:5432); the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench._server import fresh_database
from lotline.services import Lineage
from lotline.store import schema
from lotline.store.engine import Store
from lotline.store.schema import data_status, datasets

NS = "bench"
JOBS = 10
DAY0 = dt.date(2023, 1, 1)
DAYS = 365
PER_DAY = 288
BATCH = 10_000


def _lot(day: int, ordinal: int) -> str:
    return f"{DAY0 + dt.timedelta(days=day):%Y%m%d}PT5M{ordinal:03d}"


def _last_job_status(day: int, ordinal: int) -> tuple[str, str | None] | None:
    """The last job's row at (day, ordinal): (status, held status), or None for no row."""
    if (day % 3 == 0 and ordinal == (day * 7) % PER_DAY) or (day % 20 == 0 and ordinal == 200) or day == 300:
        return None  # missing; at 200 every 20th day and on day 300 the input is not READY either
    if day % 10 == 0 and ordinal == 100:
        return ("ERROR", None)
    if day == 150:
        return ("RESUBMIT", None)
    if day == 200 and 50 <= ordinal < 60:
        return ("HOLD", "READY")
    if day == DAYS - 1 and ordinal >= PER_DAY - 3:
        return ("RUNNING", None)
    return ("READY", None)


def _input_status(day: int, ordinal: int) -> str | None:
    """The last job's input: failed at 200 every 20th day, day 300 never produced."""
    if day == 300:
        return None
    return "ERROR" if day % 20 == 0 and ordinal == 200 else "READY"


def _rows(ids: dict[str, Any], jobs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for n in range(JOBS):
        output, job = ids[f"d{n}"], jobs[f"j{n}"]
        for day in range(DAYS):
            for ordinal in range(PER_DAY):
                lot = _lot(day, ordinal)
                if n == JOBS - 1:
                    found = _last_job_status(day, ordinal)
                elif n == JOBS - 2:
                    status = _input_status(day, ordinal)
                    found = None if status is None else (status, None)
                else:
                    found = ("READY", None)
                if found is None:
                    continue
                status, held = found
                yield {
                    "dataset_id": output,
                    "lot": lot,
                    "job_id": job,
                    "role": "OUTPUT",
                    "status": status,
                    "held_status": held,
                }
                if n > 0 and status == "READY":
                    yield {
                        "dataset_id": ids[f"d{n - 1}"],
                        "lot": lot,
                        "job_id": job,
                        "role": "INPUT",
                        "status": "DONE",
                        "held_status": None,
                    }


def _seed(url: str) -> int:
    lineage = Lineage.over(Store(url))
    lineage.catalog.upsert_namespace(NS)
    for n in range(JOBS):
        lineage.catalog.upsert_dataset(NS, f"d{n}")
        inputs = [f"d{n - 1}"] if n else []
        lineage.lots.register_job(NS, f"j{n}", output=f"d{n}", inputs=inputs)
    lineage.close()
    store = Store(url)
    now = dt.datetime.now(dt.UTC)
    common = {"attempt": 1, "owner": "seed", "created_at": now, "updated_at": now}
    written = 0
    with store.write() as connection:
        ids = dict(connection.execute(sa.select(datasets.c.name, datasets.c.id)).all())
        jobs = dict(connection.execute(sa.select(schema.jobs.c.name, schema.jobs.c.id)).all())
        batch: list[dict[str, Any]] = []
        for row in _rows(ids, jobs):
            batch.append({**common, **row})
            if len(batch) == BATCH:
                connection.execute(sa.insert(data_status), batch)
                written += len(batch)
                batch = []
        connection.execute(sa.insert(data_status), batch)
        written += len(batch)
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM ANALYZE" if store.backend == "postgresql" else "ANALYZE")
    store.dispose()
    return written


def _median_ms(call: Callable[[], object], repeat: int) -> float:
    for _ in range(2):
        call()
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return 1000 * statistics.median(times)


def measure(url: str, repeat: int) -> tuple[int, float, float, str]:
    """(rows seeded, report ms, baseline ms, what the report found)."""
    seeded = _seed(url)
    lineage = Lineage.over(Store(url))

    def report() -> Any:
        return lineage.gaps.report(NS, job=f"j{JOBS - 1}", start="2023-01-01", end="2024-01-01")

    with lineage.store.read() as connection:
        dataset_id = connection.execute(
            sa.select(datasets.c.id).where(datasets.c.name == f"d{JOBS - 1}")
        ).scalar_one()
    baseline = sa.text(
        "SELECT status, count(*) FROM data_status WHERE dataset_id = :d AND role = 'OUTPUT'"
        " AND lot >= :a AND lot <= :b GROUP BY status"
    ).bindparams(sa.bindparam("d", type_=sa.Uuid()))  # a UUID as each database stores it

    def plain() -> Any:
        with lineage.store.read() as connection:
            return connection.execute(
                baseline, {"d": dataset_id, "a": _lot(0, 0), "b": _lot(DAYS - 1, PER_DAY - 1)}
            ).all()

    report_ms = _median_ms(report, repeat)
    baseline_ms = _median_ms(plain, repeat)
    found = report()
    counts = ", ".join(f"{s.value} {n}" for s, n in found.counts.items() if n)
    lineage.close()
    return seeded, report_ms, baseline_ms, f"{found.total} lots: {counts}; {len(found.runs)} runs"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=20, help="measured calls (median; default 20)")
    parser.add_argument("--backends", default="postgresql,sqlite", help="default postgresql,sqlite")
    args = parser.parse_args()
    now = dt.datetime.now(dt.UTC)
    print(
        f"gap report bench, one year of PT5M lots x {JOBS} jobs, {os.cpu_count()} CPUs, "
        f"{now:%Y-%m-%d %H:%M} UTC"
    )
    for backend in args.backends.split(","):
        if backend == "postgresql":
            with fresh_database("gaps") as url:
                seeded, report_ms, baseline_ms, found = measure(url, args.repeat)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                url = f"sqlite:///{Path(tmp, 'lotline.db')}"
                Store(url).upgrade()
                seeded, report_ms, baseline_ms, found = measure(url, args.repeat)
        print(f"{backend:10} {seeded} rows; report {found}", flush=True)
        print(
            f"{backend:10} report with its list {report_ms:7.1f} ms, "
            f"one plain SQL count {baseline_ms:7.1f} ms, "
            f"ratio {report_ms / baseline_ms:5.2f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
