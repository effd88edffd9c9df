"""OpenLineage ingest rate on PostgreSQL, next to a bare one-row-per-transaction insert of the same bodies.

Run: ``.venv/bin/python -m bench.ingest [seconds]``. Each phase runs for a fixed time, bounded,
against 127.0.0.1 only; results go to docs/benchmarks.md by hand.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import time
import uuid
from typing import Any

import psycopg
import requests
import sqlalchemy as sa

from bench._server import fresh_database, serve

CLIENTS = 8
BATCH = 100


def events(worker: int, count: int) -> list[dict[str, Any]]:
    """START then COMPLETE of distinct runs, each reading one dataset and writing another."""
    out = []
    for i in range(count // 2):
        run_id = str(uuid.uuid4())
        for kind, minute in (("START", 0), ("COMPLETE", 1)):
            out.append(
                {
                    "eventType": kind,
                    "eventTime": f"2026-01-01T00:0{minute}:00Z",
                    "producer": "https://lotline.bench",
                    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                    "run": {"runId": run_id, "facets": {}},
                    "job": {"namespace": "bench", "name": f"job-{worker}-{i % 50}"},
                    "inputs": [] if kind != "START" else [{"namespace": "bench", "name": f"in-{worker}"}],
                    "outputs": [] if kind == "START" else [{"namespace": "bench", "name": f"out-{worker}"}],
                }
            )
    return out


def _post_singles(args: tuple[str, int, float]) -> int:
    url, worker, seconds = args
    done = 0
    with requests.Session() as session:
        deadline = time.monotonic() + seconds
        for event in events(worker, 100_000):
            if time.monotonic() > deadline:
                break
            assert session.post(f"{url}/api/v1/lineage", json=event, timeout=30).status_code == 201
            done += 1
    return done


def _post_batches(args: tuple[str, int, float]) -> int:
    url, worker, seconds = args
    done = 0
    all_events = events(worker + 100, 200_000)
    with requests.Session() as session:
        deadline = time.monotonic() + seconds
        for start in range(0, len(all_events), BATCH):
            if time.monotonic() > deadline:
                break
            chunk = all_events[start : start + BATCH]
            answer = session.post(f"{url}/api/v1/lineage/batch", json=chunk, timeout=60)
            assert answer.json()["status"] == "success"
            done += BATCH
    return done


def _bare(args: tuple[str, int, float]) -> int:
    db_url, worker, seconds = args
    bodies = [json.dumps(e) for e in events(worker, 20_000)]
    dsn = sa.make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)
    done = 0
    with psycopg.connect(dsn, autocommit=True) as connection:
        deadline = time.monotonic() + seconds
        for body in bodies:
            if time.monotonic() > deadline:
                break
            connection.execute("INSERT INTO bare_events (payload) VALUES (%s::jsonb)", (body,))
            done += 1
    return done


def rate(function: Any, args: list[tuple[Any, ...]], seconds: float) -> float:
    with multiprocessing.get_context("spawn").Pool(len(args)) as pool:
        started = time.monotonic()
        total = sum(pool.map(function, args))
        elapsed = max(time.monotonic() - started, seconds)
    return total / elapsed


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    with fresh_database("ingest") as db_url:
        dsn = sa.make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute("CREATE TABLE bare_events (id bigserial PRIMARY KEY, payload jsonb NOT NULL)")
        bare = rate(_bare, [(db_url, w, seconds) for w in range(CLIENTS)], seconds)
        with serve(db_url, 5099) as url:
            single = rate(_post_singles, [(url, w, seconds) for w in range(CLIENTS)], seconds)
            batch = rate(_post_batches, [(url, w, seconds) for w in range(2)], seconds)
    print(f"bare insert, {CLIENTS} connections: {bare:.0f}/s")
    print(f"single POST /lineage, {CLIENTS} clients: {single:.0f} events/s = {single / bare:.2f}x bare")
    print(f"POST /lineage/batch ({BATCH}/batch, 2 clients): {batch:.0f} events/s = {batch / bare:.2f}x bare")


if __name__ == "__main__":
    main()
