"""Does finding the next lot get slower as a job's history grows? Claims/s after 200, 2,000, 20,000 lots.

    .venv/bin/python -m bench.claim_history [--history 200,2000,20000] [--lots 300] [--backends ...]

For each history size H, a fresh database gets one job ``process`` (source -> out) that has already
done H lots (lot ids before the new ones, as an older backlog would be) and ``--lots`` new READY
lots of ``source``; one worker process then claims and completes the new lots through
``LotService``. The figures are lots/s and the mean time of ``claim`` alone: flat across H means the
claim search does not walk the job's history.

The history is written with bulk SQL (data-status rows and current versions exactly as lotline
leaves them after a successful claim, without the runs): writing 20,000 lots through the use cases
would take longer than the measurement. The new lots are landed through ``LotService``.
PostgreSQL is reached at LOTLINE_TEST_PG_URL (default postgres@127.0.0.1:5432); the benchmark
creates and drops its own database.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench._server import fresh_database
from lotline.services import Lineage
from lotline.store import schema
from lotline.store.engine import Store
from lotline.store.schema import data_status, dataset_version_counters, dataset_versions, datasets

NS = "bench"
DAY0 = dt.date(2023, 1, 1)


def _lot(i: int) -> str:
    """Five-minute lots from 2023-01-01 on, 288 a day."""
    day = DAY0 + dt.timedelta(days=i // 288)
    return f"{day:%Y%m%d}PT5M{i % 288:03d}"


def _seed_history(url: str, history: int) -> None:
    """H lots that ``land`` produced and ``process`` consumed and produced, as lotline leaves them."""
    store = Store(url)
    now = dt.datetime.now(dt.UTC)
    with store.write() as connection:
        ids = dict(connection.execute(sa.select(datasets.c.name, datasets.c.id)).all())
        jobs = dict(connection.execute(sa.select(schema.jobs.c.name, schema.jobs.c.id)).all())
        source, out, land, process = ids["source"], ids["out"], jobs["land"], jobs["process"]
        common = {"attempt": 1, "owner": "seed", "created_at": now, "updated_at": now}
        rows: list[dict[str, Any]] = []
        versions: list[dict[str, Any]] = []
        for i in range(history):
            lot = _lot(i)
            rows += [
                {"dataset_id": source, "lot": lot, "job_id": land, "role": "OUTPUT", "status": "READY"},
                {"dataset_id": source, "lot": lot, "job_id": process, "role": "INPUT", "status": "DONE"},
                {"dataset_id": out, "lot": lot, "job_id": process, "role": "OUTPUT", "status": "READY"},
            ]
            for dataset_id in (source, out):
                versions.append(
                    {
                        "id": uuid.uuid4(),
                        "dataset_id": dataset_id,
                        "version_number": i + 1,
                        "lot": lot,
                        "state": "current",
                        "fields": [],
                        "created_at": now,
                    }
                )
        for start in range(0, len(rows), 5000):
            connection.execute(sa.insert(data_status), [{**common, **r} for r in rows[start : start + 5000]])
        for start in range(0, len(versions), 5000):
            connection.execute(sa.insert(dataset_versions), versions[start : start + 5000])
        # The version counters, which live in a table of their own (not in the dataset row).
        counters = dataset_version_counters
        connection.execute(sa.delete(counters).where(counters.c.dataset_id.in_([source, out])))
        connection.execute(
            sa.insert(counters),
            [{"dataset_id": d, "last_version_number": history} for d in (source, out)],
        )
    if store.backend == "postgresql":
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql("VACUUM ANALYZE")
    store.dispose()


def _prepare(url: str, history: int, lots: int) -> None:
    lineage = Lineage.over(Store(url))
    lineage.catalog.upsert_namespace(NS)
    for dataset in ("source", "out"):
        lineage.catalog.upsert_dataset(NS, dataset)
    lineage.lots.register_job(NS, "land", output="source")
    lineage.lots.register_job(NS, "process", inputs=["source"], output="out")
    lineage.close()
    _seed_history(url, history)
    lineage = Lineage.over(Store(url))
    for i in range(history, history + lots):
        claim = lineage.lots.claim("lander", NS, "land", lot=_lot(i))
        assert claim is not None
        lineage.lots.complete(claim)
    lineage.close()


def _worker(url: str, results: Any) -> None:
    lineage = Lineage.over(Store(url))
    claiming = 0.0
    done = 0
    began = time.perf_counter()
    while True:
        before = time.perf_counter()
        claim = lineage.lots.claim("w0", NS, "process")
        claiming += time.perf_counter() - before
        if claim is None:
            break
        lineage.lots.complete(claim)
        done += 1
    results.put((done, time.perf_counter() - began, claiming))
    lineage.close()


def measure(url: str, history: int, lots: int) -> tuple[float, float]:
    """(lots/s, mean ms per claim) of one worker process over ``lots`` new lots."""
    _prepare(url, history, lots)
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    process = spawn.Process(target=_worker, args=(url, results))
    process.start()
    done, elapsed, claiming = results.get()
    process.join()
    assert done == lots, f"{done} of {lots} lots processed"
    return done / elapsed, 1000 * claiming / (done + 1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--history", default="200,2000,20000", help="done lots before the measurement")
    parser.add_argument("--lots", type=int, default=300, help="new lots claimed and completed (default 300)")
    parser.add_argument("--backends", default="postgresql,sqlite", help="default postgresql,sqlite")
    args = parser.parse_args()
    now = dt.datetime.now(dt.UTC)
    print(f"claim history bench, {args.lots} new lots, {os.cpu_count()} CPUs, {now:%Y-%m-%d %H:%M} UTC")
    for backend in args.backends.split(","):
        for history in (int(h) for h in args.history.split(",")):
            if backend == "postgresql":
                with fresh_database("history") as url:
                    rate, claim_ms = measure(url, history, args.lots)
            else:
                with tempfile.TemporaryDirectory() as tmp:
                    url = f"sqlite:///{Path(tmp, 'lotline.db')}"
                    Store(url).upgrade()
                    rate, claim_ms = measure(url, history, args.lots)
            print(
                f"{backend:10} history {history:6d}: {rate:7.1f} lots/s (claim+complete), "
                f"claim {claim_ms:6.2f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
