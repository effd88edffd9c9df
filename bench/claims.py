"""Claim+complete per second through lotline, next to a bare one-table queue, at 1/2/4/8 processes.

    .venv/bin/python -m bench.claims [--lots 3000] [--workers 1,2,4,8] [--backends postgresql,sqlite]
                                     [--rounds 3]

lotline's figure is the whole use case a worker runs per lot: ``LotService.claim`` (eligibility,
OUTPUT/INPUT rows, a run created and started with its inputs pinned) and ``complete`` (fenced
status change, run COMPLETED, output version minted and made current), each one transaction —
on PostgreSQL one call each of the functions of migration 0006, as deployed. Each figure is the
median of ``--rounds`` measurements that alternate with the baseline's, so that a burst of load
from elsewhere on the machine hits both.
The baseline is the bare queue of REFERENCE.md: ``UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP
LOCKED LIMIT 1)`` plus a fenced complete on PostgreSQL, each one autocommit statement (one round
trip each, like lotline's two calls), ``BEGIN IMMEDIATE`` claim on SQLite. Both
are measured in the same run, with separate processes, and both check for duplicate claims.
PostgreSQL is reached at LOTLINE_BENCH_PG_URL (default postgresql://postgres@127.0.0.1:5432/postgres);
the benchmark creates and drops its own database.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa

from lotline.domain.runs import RunState
from lotline.services import Lineage
from lotline.store.engine import Store

NS = "bench"
PG_ADMIN = os.environ.get("LOTLINE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


# -- worker processes -------------------------------------------------------------------------------
def _lotline_worker(url: str, job: str, worker: str, start: Any, results: Any) -> None:
    lineage = Lineage.over(Store(url))
    done = 0
    start.wait()
    while (claim := lineage.lots.claim(worker, NS, job)) is not None:
        lineage.lots.complete(claim)
        done += 1
    results.put(done)
    lineage.close()


def _pg_queue_worker(dsn: str, worker: str, start: Any, results: Any) -> None:
    """Each statement is its own transaction (autocommit): one round trip to claim, one to complete."""
    claimed: list[int] = []
    with psycopg.connect(dsn, autocommit=True) as connection:
        start.wait()
        while True:
            row = connection.execute(
                "UPDATE bench_queue SET status = 'running', owner = %s, "
                "lease_until = now() + interval '30 s' WHERE id = (SELECT id FROM bench_queue "
                "WHERE status = 'ready' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id",
                (worker,),
            ).fetchone()
            if row is None:
                break
            fenced = connection.execute(
                "UPDATE bench_queue SET status = 'done' WHERE id = %s AND owner = %s AND status = 'running'",
                (row[0], worker),
            )
            assert fenced.rowcount == 1
            claimed.append(row[0])
    results.put(claimed)


def _sqlite_queue_worker(path: str, worker: str, start: Any, results: Any) -> None:
    claimed: list[int] = []
    connection = sqlite3.connect(path, timeout=60, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    start.wait()
    while True:
        connection.execute("BEGIN IMMEDIATE")
        row = connection.execute(
            "SELECT id FROM bench_queue WHERE status = 'ready' ORDER BY id LIMIT 1"
        ).fetchone()
        if row is None:
            connection.execute("COMMIT")
            break
        connection.execute(
            "UPDATE bench_queue SET status = 'running', owner = ?, lease_until = ? WHERE id = ?",
            (worker, time.time() + 30, row[0]),
        )
        connection.execute("COMMIT")
        connection.execute("BEGIN IMMEDIATE")
        fenced = connection.execute(
            "UPDATE bench_queue SET status = 'done' WHERE id = ? AND owner = ? AND status = 'running'",
            (row[0], worker),
        )
        assert fenced.rowcount == 1
        connection.execute("COMMIT")
        claimed.append(row[0])
    connection.close()
    results.put(claimed)


def _timed(
    target: Callable[..., None], args_for: Callable[[int], tuple[Any, ...]], workers: int
) -> tuple[float, list[Any]]:
    """Start ``workers`` processes, release them together, and time until the last one ends."""
    spawn = multiprocessing.get_context("spawn")
    start, results = spawn.Event(), spawn.Queue()
    processes = [spawn.Process(target=target, args=(*args_for(i), start, results)) for i in range(workers)]
    for process in processes:
        process.start()
    time.sleep(1.5)  # let every process import and connect before the clock starts
    began = time.perf_counter()
    start.set()
    collected = [results.get() for _ in processes]
    elapsed = time.perf_counter() - began
    for process in processes:
        process.join()
        assert process.exitcode == 0, f"a benchmark worker failed ({process.exitcode})"
    return elapsed, collected


# -- set-up --------------------------------------------------------------------------------------------
def _lot(i: int) -> str:
    return f"202301{1 + i // 288:02d}PT5M{i % 288:03d}"


def _prepare_lotline(url: str, lots: int, jobs: list[str]) -> None:
    """One source dataset with ``lots`` READY lots, and one consumer job per measurement."""
    lineage = Lineage.over(Store(url))
    lineage.catalog.upsert_namespace(NS)
    for dataset in ["source", *[f"out_{j}" for j in jobs]]:
        lineage.catalog.upsert_dataset(NS, dataset)
    lineage.lots.register_job(NS, "land", output="source")
    for job in jobs:
        lineage.lots.register_job(NS, job, inputs=["source"], output=f"out_{job}")
    for i in range(lots):
        claim = lineage.lots.claim("lander", NS, "land", lot=_lot(i))
        assert claim is not None
        lineage.lots.complete(claim)
    lineage.close()


def _check_lotline(url: str, job: str, lots: int) -> int:
    """Duplicates: (job, lot)s with more than one successful run, or lots not READY."""
    lineage = Lineage.over(Store(url))
    runs = Counter[str]()
    for offset in range(0, lots, 1000):
        for run in lineage.runs.list_runs(NS, job, limit=1000, offset=offset).items:
            if run.state is RunState.COMPLETED:
                runs[run.lot or ""] += 1
    ready = sum(r.status.value == "READY" for r in lineage.lots.status(NS, job=job))
    lineage.close()
    assert ready == lots and len(runs) == lots, f"{job}: {ready} READY, {len(runs)} lots with runs of {lots}"
    return sum(n - 1 for n in runs.values())


def _pg_queue(dsn: str, lots: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("DROP TABLE IF EXISTS bench_queue")
        connection.execute(
            "CREATE TABLE bench_queue (id bigserial PRIMARY KEY, status text NOT NULL, owner text, "
            "lease_until timestamptz)"
        )
        connection.execute("CREATE INDEX ON bench_queue (status, id)")
        connection.execute(
            "INSERT INTO bench_queue (status) SELECT 'ready' FROM generate_series(1, %s)", (lots,)
        )
        connection.execute("VACUUM ANALYZE bench_queue")


def _sqlite_queue(path: str, lots: int) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("DROP TABLE IF EXISTS bench_queue")
    connection.execute(
        "CREATE TABLE bench_queue "
        "(id INTEGER PRIMARY KEY, status TEXT NOT NULL, owner TEXT, lease_until REAL)"
    )
    connection.execute("CREATE INDEX ix_queue ON bench_queue (status, id)")
    connection.executemany("INSERT INTO bench_queue (status) VALUES ('ready')", [()] * lots)
    connection.close()


# -- the run ----------------------------------------------------------------------------------------------
def _analyze(url: str) -> None:
    """Fresh planner statistics after the set-up, as autovacuum would gather in a running system."""
    store = Store(url)
    with store.engine.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
    store.dispose()


def bench_backend(backend: str, lots: int, worker_counts: list[int], rounds: int) -> list[dict[str, Any]]:
    """For each process count, ``rounds`` alternating measurements of lotline and of the bare queue
    (a fresh consumer job and a fresh queue each time); the medians and their ratio are the result."""
    jobs = {(n, r): f"process_{n}_{r}" for n in worker_counts for r in range(rounds)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if backend == "postgresql":
            name = f"lotline_bench_{uuid.uuid4().hex[:8]}"
            admin = sa.create_engine(
                PG_ADMIN.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT"
            )
            with admin.connect() as connection:
                connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
            url = str(sa.make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False))
            Store(url).upgrade()
            queue_dsn = url
        else:
            url = f"sqlite:///{Path(tmp, 'lotline.db')}"
            Store(url).upgrade()
            queue_path = str(Path(tmp, "queue.db"))
        try:
            _prepare_lotline(url, lots, list(jobs.values()))
            _analyze(url)
            for workers in worker_counts:
                figures, baselines, duplicates, base_duplicates = [], [], 0, 0
                for r in range(rounds):
                    job = jobs[(workers, r)]
                    elapsed, _ = _timed(_lotline_worker, lambda i, job=job: (url, job, f"w{i}"), workers)
                    duplicates += _check_lotline(url, job, lots)
                    if backend == "postgresql":
                        _pg_queue(queue_dsn, lots)
                        base_elapsed, claimed = _timed(
                            _pg_queue_worker, lambda i: (queue_dsn, f"w{i}"), workers
                        )
                    else:
                        _sqlite_queue(queue_path, lots)
                        base_elapsed, claimed = _timed(
                            _sqlite_queue_worker, lambda i: (queue_path, f"w{i}"), workers
                        )
                    ids = [i for chunk in claimed for i in chunk]
                    base_duplicates += len(ids) - len(set(ids))
                    assert len(set(ids)) == lots
                    figures.append(lots / elapsed)
                    baselines.append(lots / base_elapsed)
                figure, baseline = statistics.median(figures), statistics.median(baselines)
                rows.append(
                    {
                        "backend": backend,
                        "workers": workers,
                        "lotline": figure,
                        "baseline": baseline,
                        "ratio": figure / baseline,
                        "duplicates": duplicates,
                        "baseline_duplicates": base_duplicates,
                    }
                )
                print(
                    f"{backend:10} {workers} workers: lotline {figure:7.1f}/s  bare queue {baseline:7.1f}/s  "
                    f"ratio {figure / baseline:.2f}  duplicates {duplicates}/{base_duplicates}  "
                    f"(rounds: lotline {_rates(figures)}; bare {_rates(baselines)})",
                    flush=True,
                )
        finally:
            if backend == "postgresql":
                with admin.connect() as connection:
                    connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                admin.dispose()
    return rows


def _rates(values: list[float]) -> str:
    return ", ".join(f"{v:.0f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lots", type=int, default=3000, help="lots per measurement (default 3000)")
    parser.add_argument("--workers", default="1,2,4,8", help="worker process counts (default 1,2,4,8)")
    parser.add_argument("--backends", default="postgresql,sqlite", help="default postgresql,sqlite")
    parser.add_argument("--rounds", type=int, default=3, help="alternating measurements per count (median)")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    print(
        f"claims bench, {args.lots} lots per measurement, median of {args.rounds} rounds, "
        f"{os.cpu_count()} CPUs, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    for backend in args.backends.split(","):
        bench_backend(backend, args.lots, counts, args.rounds)


if __name__ == "__main__":
    main()
