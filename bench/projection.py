"""Projection alone, and reads under a backlog: the journal's events applied by ``lotline project``'s
code path (``ProjectionService.drain``), next to a bare INSERT of the same bodies, in one run.

Run: ``.venv/bin/python -m bench.projection [--events N] [--backends postgresql,sqlite] [--reads R]``.

For each backend, on a fresh database: the bench events of ``bench/ingest`` (START then COMPLETE
of distinct runs, one input and one output, 50 jobs per client, 8 clients' worth) are journaled
without being projected (``accept_batch``), then drained in this process; the figure is events
applied per second of the drain, and the baseline is a bare one-statement-per-row INSERT of the
same JSON bodies into a one-table journal on the same database (autocommit, one connection: the
projector is one connection too). On PostgreSQL, ``--reads`` then measures reads under a backlog: with
a server running, ``GET`` a run, a job's runs and the web UI's home page ``--reads`` times each
with nothing pending (the baseline), then again right after ``--backlog`` events were journaled at
once (the server's projector works on them meanwhile): p50/p95 of each; and one read with
``Prefer: wait=60`` (the read that waits for its writes, as every read did before, then for at
most 5 s) to show what catching up costs.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
import requests
import sqlalchemy as sa

from bench._server import fresh_database, serve
from bench.ingest import CLIENTS, events
from lotline.services import Lineage
from lotline.store.engine import Store

PORT = 5097
CHUNK = 1000


def _journal(lineage: Lineage, bodies: list[dict[str, Any]]) -> None:
    for i in range(0, len(bodies), CHUNK):
        outcome = lineage.openlineage.accept_batch(bodies[i : i + CHUNK])
        assert not outcome.refused and not outcome.duplicates, outcome


def _bodies(count: int, salt: int) -> list[dict[str, Any]]:
    """About ``count`` events (a multiple of 16)."""
    per = count // CLIENTS
    return [e for worker in range(CLIENTS) for e in events(worker + salt, per)]


def _bare_postgresql(db_url: str, bodies: list[str]) -> float:
    dsn = sa.make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS bare_events (id bigserial PRIMARY KEY, payload jsonb)")
        started = time.perf_counter()
        for body in bodies:
            connection.execute("INSERT INTO bare_events (payload) VALUES (%s::jsonb)", (body,))
        return len(bodies) / (time.perf_counter() - started)


def _bare_sqlite(path: Path, bodies: list[str]) -> float:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE bare_events (id INTEGER PRIMARY KEY, payload TEXT)")
    started = time.perf_counter()
    for body in bodies:
        connection.execute("INSERT INTO bare_events (payload) VALUES (?)", (body,))
    rate = len(bodies) / (time.perf_counter() - started)
    connection.close()
    return rate


def _drain(db_url: str, count: int) -> tuple[float, float]:
    """Events projected per second of wall time and ms of this process's CPU per event."""
    with Lineage.over(Store(db_url)) as lineage:
        bodies = _bodies(count, 0)
        count = len(bodies)
        _journal(lineage, bodies)
        wall, cpu = time.perf_counter(), time.process_time()
        drained = lineage.projection.drain()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert not drained.failed and len(drained.applied) == count, drained.failed[:3]
        return count / wall, cpu * 1000 / count


def projection(backend: str, count: int) -> None:
    bodies = [json.dumps(e) for e in _bodies(count, 50)]
    if backend == "postgresql":
        with fresh_database("projection") as db_url:
            bare = _bare_postgresql(db_url, bodies)
            rate, cpu = _drain(db_url, count)
    else:
        with tempfile.TemporaryDirectory() as directory:
            bare = _bare_sqlite(Path(directory) / "bare.db", bodies)
            db_url = f"sqlite:///{directory}/lotline.db"
            Store(db_url).upgrade()
            rate, cpu = _drain(db_url, count)
    print(
        f"{backend}: {len(bodies)} events projected at {rate:,.0f}/s "
        f"({cpu:.2f} ms of projector CPU per event); "
        f"bare INSERT of the same bodies {bare:,.0f}/s; ratio {rate / bare:.2f}x",
        flush=True,
    )


def _timed(url: str, headers: dict[str, str] | None = None) -> tuple[float, requests.Response]:
    started = time.perf_counter()
    answer = requests.get(url, headers=headers, timeout=1200)
    return (time.perf_counter() - started) * 1000, answer


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def _up(url: str) -> None:
    """Wait for the server to answer (``serve`` gives up after ~20 s; a loaded machine needs more)."""
    for _ in range(600):
        try:
            if requests.get(f"{url}/healthz", timeout=5).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.5)
    raise SystemExit("the server did not start")


def _reads(paths: dict[str, str], reads: int) -> tuple[dict[str, list[float]], list[int]]:
    took: dict[str, list[float]] = {what: [] for what in paths}
    backlogs = []
    for _ in range(reads):
        for what, path in paths.items():
            ms, answer = _timed(path)
            assert answer.status_code == 200, (path, answer.status_code, answer.text[:200])
            backlogs.append(int(answer.headers.get("X-Lineage-Pending", "0")))
            took[what].append(ms)
    return took, backlogs


def reads_under_backlog(count: int, reads: int) -> None:
    """The same reads with no backlog (the baseline) then with ``count`` events journaled at once
    (through the service, as a burst of batch POSTs would), while the server's projector works on them."""
    with fresh_database("reads") as db_url, Lineage.over(Store(db_url)) as lineage:
        bodies = _bodies(count, 0)
        _journal(lineage, bodies[:2])
        lineage.projection.drain()
        run_id, job = bodies[0]["run"]["runId"], bodies[0]["job"]["name"]
        with serve(db_url, PORT) as (url, _):
            paths = {
                "GET /api/v1/jobs/runs/{id}": f"{url}/api/v1/jobs/runs/{run_id}",
                "GET /api/v1/namespaces/bench/jobs/{job}/runs": (
                    f"{url}/api/v1/namespaces/bench/jobs/{job}/runs"
                ),
                "GET /?ns=bench (web)": f"{url}/?ns=bench",
            }
            _up(url)
            idle, _ = _reads(paths, reads)
            _journal(lineage, bodies[2:])
            under, backlogs = _reads(paths, reads)
            before = int(requests.get(f"{url}/healthz", timeout=60).json()["pendingEvents"])
            print(
                f"reads after {count - 2:,} events were journaled at once: backlog seen by the reads "
                f"{max(backlogs):,} .. {min(backlogs):,} (X-Lineage-Pending); then /healthz "
                f"pendingEvents {before:,}",
                flush=True,
            )
            waited, answer = _timed(paths["GET /api/v1/jobs/runs/{id}"], {"Prefer": "wait=60"})
            left = int(answer.headers.get("X-Lineage-Pending", "0"))
            print(
                f"  one read with Prefer: wait=60 (as every read waited before, for at most 5 s): "
                f"{waited:,.0f} ms, {before:,} pending before it, {left:,} after",
                flush=True,
            )
    print("| read | p50 / p95 under the backlog (ms) | p50 / p95 with no backlog (ms), same run |")
    print("|---|---|---|")
    for what in paths:
        print(
            f"| {what} | {_p(under[what], 50):.1f} / {_p(under[what], 95):.1f} | "
            f"{_p(idle[what], 50):.1f} / {_p(idle[what], 95):.1f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=4000, help="events to project per backend")
    parser.add_argument("--backends", default="postgresql,sqlite")
    parser.add_argument("--reads", type=int, default=0, help="each read this many times under a backlog")
    parser.add_argument("--backlog", type=int, default=30_000, help="events pending when the reads start")
    options = parser.parse_args()
    for backend in filter(None, options.backends.split(",")):
        projection(backend, options.events)
    if options.reads:
        reads_under_backlog(options.backlog, options.reads)


if __name__ == "__main__":
    main()
