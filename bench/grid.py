"""How long does the web UI's lot grid of a year of five-minute lots take? Beside the report it draws.

    .venv/bin/python -m bench.grid [--repeat 20] [--backends postgresql,sqlite]

The database of ``bench.gaps`` (a chain of 10 registered jobs with one year, 2023, of PT5M lots
each, ~2.1 million data-status rows, the last job's lots with gaps of every kind; seeded by its
functions), plus what a grid reads besides the report: a current dataset version and a manifest for
each READY lot of the last job's dataset (105,000 of each, as publishing leaves them), the manifests
of one lot in every 20 (5,166) empty.

Measured: ``GapService.grid`` of the last job over the year with no resolution asked (the automatic
one: a day per cell, 365 cells), median of ``--repeat`` calls after two warm-ups, next to the
baseline it cannot beat, measured in the same run: ``GapService.report`` over the same range (the
grid is that report, the empty lots, and the cells). The plain SQL count of ``bench.gaps`` is
printed too, and the grid's own parts: the empty lots' read (``store.queries.gaps.empty_lots``) and
building the cells (``domain.grid.build``). PostgreSQL is reached at LOTLINE_TEST_PG_URL (default
postgres@127.0.0.1:5432); the benchmark creates and drops its own database. Target (issue 19): the
grid under 300 ms on PostgreSQL. The finest grid a year may have, per hour (8,760 cells), is
measured too.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench._server import fresh_database
from bench.gaps import DAYS, JOBS, NS, PER_DAY, _last_job_status, _lot, _median_ms, _seed
from lotline.domain import gaps as g
from lotline.domain import grid as lot_grid
from lotline.domain.lots import Interval
from lotline.services import Lineage
from lotline.store.engine import Store
from lotline.store.queries import gaps
from lotline.store.schema import data_status, dataset_versions, datasets, manifests

YEAR = {"start": "2023-01-01", "end": "2024-01-01"}
BATCH = 10_000
#: One lot in this many of the last job's READY lots is published empty.
EMPTY_EVERY = 20
TARGET_MS = 300.0


def _seed_manifests(url: str) -> int:
    """A current version and a manifest for each READY lot of the last job's dataset."""
    store = Store(url)
    now = dt.datetime.now(dt.UTC)
    written = 0
    with store.write() as connection:
        dataset_id = connection.execute(
            sa.select(datasets.c.id).where(datasets.c.name == f"d{JOBS - 1}")
        ).scalar_one()
        versions: list[dict[str, Any]] = []
        found: list[dict[str, Any]] = []

        def flush() -> None:
            connection.execute(sa.insert(dataset_versions), versions)
            connection.execute(sa.insert(manifests), found)
            versions.clear()
            found.clear()

        number = 0
        for day in range(DAYS):
            for ordinal in range(PER_DAY):
                if _last_job_status(day, ordinal) != ("READY", None):
                    continue
                lot, number = _lot(day, ordinal), number + 1
                version_id = uuid.uuid4()
                empty = (day * PER_DAY + ordinal) % EMPTY_EVERY == 0
                versions.append(
                    {
                        "id": version_id,
                        "dataset_id": dataset_id,
                        "version_number": number,
                        "lot": lot,
                        "state": "current",
                        "created_at": now,
                    }
                )
                found.append(
                    {
                        "id": uuid.uuid4(),
                        "dataset_id": dataset_id,
                        "lot": lot,
                        "version_id": version_id,
                        "attempt": 1,
                        "state": "empty" if empty else "complete",
                        "uri_type": "path",
                        "location": f"/warehouse/{NS}/d{JOBS - 1}/{lot}/attempt-1",
                        "objects": [] if empty else [{"uri": "part-0.parquet", "size": 1000}],
                        "object_count": 0 if empty else 1,
                        "total_bytes": 0 if empty else 1000,
                        "row_count": 0 if empty else 10,
                        "created_at": now,
                        "updated_at": now,
                    }
                )
                written += 1
                if len(found) == BATCH:
                    flush()
        if found:
            flush()
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM ANALYZE" if store.backend == "postgresql" else "ANALYZE")
    store.dispose()
    return written


def measure(url: str, repeat: int) -> dict[str, Any]:
    seeded = _seed(url) + 2 * _seed_manifests(url)
    lineage = Lineage.over(Store(url))
    job = f"j{JOBS - 1}"

    def grid() -> Any:
        return lineage.gaps.grid(NS, job=job, **YEAR)

    def hourly() -> Any:
        return lineage.gaps.grid(NS, job=job, resolution="hour", **YEAR)

    def report() -> Any:
        return lineage.gaps.report(NS, job=job, **YEAR)

    with lineage.store.read() as connection:
        dataset_id = connection.execute(
            sa.select(datasets.c.id).where(datasets.c.name == f"d{JOBS - 1}")
        ).scalar_one()
    count = (
        sa.select(data_status.c.status, sa.func.count())
        .where(
            data_status.c.dataset_id == dataset_id,
            data_status.c.role == "OUTPUT",
            data_status.c.lot >= _lot(0, 0),
            data_status.c.lot <= _lot(DAYS - 1, PER_DAY - 1),
        )
        .group_by(data_status.c.status)
    )

    def plain() -> Any:
        with lineage.store.read() as connection:
            return connection.execute(count).all()

    # Where the grid's time goes beyond the report: the empty lots' read, and building the cells.
    interval = Interval(5)
    pattern, first, last = g.id_pattern(interval), _lot(0, 0), _lot(DAYS - 1, PER_DAY - 1)

    def empty() -> list[str]:
        with lineage.store.read() as connection:
            return gaps.empty_lots(connection, dataset_id, first, last, pattern)

    made, empties = report(), empty()

    found = grid()
    totals = ", ".join(f"{s.value} {n}" for s, n in found.totals().items() if n)
    shape = f"{len(found.cells)} cells per {found.resolution.value}, {found.report.total} lots"
    result = {
        "seeded": seeded,
        "grid": _median_ms(grid, repeat),
        "hourly": _median_ms(hourly, repeat),
        "report": _median_ms(report, repeat),
        "plain": _median_ms(plain, repeat),
        "empty": _median_ms(empty, repeat),
        "build": _median_ms(lambda: lot_grid.build(made, empties), repeat),
        "found": f"{shape}: {totals}",
    }
    lineage.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=20, help="measured calls (median; default 20)")
    parser.add_argument("--backends", default="postgresql", help="default postgresql; or postgresql,sqlite")
    args = parser.parse_args()
    now = dt.datetime.now(dt.UTC)
    print(
        f"lot grid bench, one year of PT5M lots x {JOBS} jobs, {os.cpu_count()} CPUs, "
        f"{now:%Y-%m-%d %H:%M} UTC"
    )
    for backend in args.backends.split(","):
        if backend == "postgresql":
            with fresh_database("grid") as url:
                found = measure(url, args.repeat)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                url = f"sqlite:///{Path(tmp, 'lotline.db')}"
                Store(url).upgrade()
                found = measure(url, args.repeat)
        grid_ms, report_ms = found["grid"], found["report"]
        verdict = ""
        if backend == "postgresql":
            verdict = f"; target < {TARGET_MS:.0f} ms {'met' if grid_ms < TARGET_MS else 'MISSED'}"
        print(f"{backend:10} {found['seeded']} rows; grid {found['found']}", flush=True)
        print(
            f"{backend:10} grid (auto) {grid_ms:7.1f} ms, gap report {report_ms:7.1f} ms, "
            f"ratio {grid_ms / report_ms:5.2f}x; one plain SQL count {found['plain']:6.1f} ms, "
            f"ratio {grid_ms / found['plain']:5.2f}x{verdict}",
            flush=True,
        )
        print(
            f"{backend:10} of which beyond the report: empty lots read {found['empty']:6.1f} ms, "
            f"cells built {found['build']:6.1f} ms; "
            f"the grid per hour (8,760 cells) {found['hourly']:6.1f} ms",
            flush=True,
        )


if __name__ == "__main__":
    main()
