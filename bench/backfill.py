"""How fast does ``lotline backfill`` make a 10-job chain's lots eligible? Beside bare SQL doing the
same row changes.

    .venv/bin/python -m bench.backfill [--days 2] [--backends postgresql]

Three scenarios, each on a fresh database with a chain of 10 registered jobs (``j0`` makes ``d0``
from nothing, ``jN`` reads ``d(N-1)`` and makes ``dN``) and ``--days`` of PT5M lots (288 a day;
``--days 365``: a year, 105,120 lots per job), seeded set-based (``bench/_seed.py``) with a run per
claim, as lotline leaves them:

- **reprocess**: every lot of the chain READY; ``backfill j0`` over the range reopens each of its
  lots and, through the invalidation cascade, the 9 downstream lots made from it;
- **dry run** of the same (what the CLI's ``--dry-run`` and the web dialog show first);
- **missing**: only ``j0``'s lots exist; ``backfill j1`` hints each of its lots (all missing, none
  blocked) on its work list (registering ``j1`` already put them there: the backfill raises them
  again, as after a worker took and dropped them).

Figures: the job's lots per second (the range's lots / the call's time), and for reprocess every
lot reopened per second (the job's and downstream). Baseline in the same run, same rows: the row
changes as bare set-based SQL in one transaction (rolled back): for reprocess, the OUTPUT rows of
the chain's lots in the range set to RESUBMIT and a work-list row inserted for each; for missing, a
work-list row inserted for each lot. Target (issue 31): ≥ 1,000 lots/s over a year for the
chain (Dagster's backfill loop plans ~30 partitions/s).
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from bench._seed import DAY0, NS, PER_DAY, lot, seed_chain
from bench.gaps import JOBS, database, machine
from lotline.services import Lineage
from lotline.store.engine import Store
from lotline.store.types import UtcDateTime

TARGET = 1000.0


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    found = call()
    return time.perf_counter() - began, found


def _bare(url: str, statements: list[str], params: dict[str, Any]) -> float:
    """Seconds for ``statements`` in one transaction, rolled back (the database state stays)."""
    store = Store(url)
    types = {"now": UtcDateTime(), "job": sa.Uuid()}
    with store.engine.connect() as connection:
        began = time.perf_counter()
        with connection.begin() as transaction:
            for statement in statements:
                binds = [sa.bindparam(k, type_=t) for k, t in types.items() if f":{k}" in statement]
                connection.execute(sa.text(statement).bindparams(*binds), params)
            taken = time.perf_counter() - began
            transaction.rollback()
    store.dispose()
    return taken


def _range(days: int) -> dict[str, Any]:
    return {"start": DAY0.isoformat(), "end": (DAY0 + dt.timedelta(days=days)).isoformat()}


def reprocess(backend: str, days: int) -> dict[str, Any]:
    with database(backend, "backfill") as url:
        seed_chain(url, JOBS, days, gaps=False, runs="all")
        bounds = {"a": lot(0, 0), "b": lot(days - 1, PER_DAY - 1), "now": dt.datetime.now(dt.UTC)}
        in_range = "role = 'OUTPUT' AND lot >= :a AND lot <= :b"
        bare = _bare(
            url,
            [
                f"UPDATE data_status SET status = 'RESUBMIT', updated_at = :now WHERE {in_range}",
                "INSERT INTO lot_frontier (job_id, lot, touched_at, failures) "
                f"SELECT job_id, lot, :now, 0 FROM data_status WHERE {in_range} "
                "ON CONFLICT (job_id, lot) DO UPDATE SET touched_at = excluded.touched_at",
            ],
            bounds,
        )
        with Lineage.over(Store(url)) as lineage:
            dry, _ = _timed(lambda: lineage.gaps.backfill(NS, "j0", **_range(days), dry_run=True))
            taken, done = _timed(lambda: lineage.gaps.backfill(NS, "j0", **_range(days)))
    reopened = sum(r.count for r in done.reopened)
    return {"lots": reopened, "all": reopened + done.cascaded, "dry": dry, "taken": taken, "bare": bare}


def missing(backend: str, days: int) -> dict[str, Any]:
    with database(backend, "backfill") as url:
        chain = seed_chain(url, 1, days, gaps=False)
        lineage = Lineage.over(Store(url))
        lineage.catalog.upsert_dataset(NS, "d1")
        lineage.lots.register_job(NS, "j1", output="d1", inputs=["d0"])
        lineage.close()
        store = Store(url)
        with store.read() as connection:
            job = connection.execute(sa.text("SELECT id FROM jobs WHERE name = 'j1'")).scalar_one()
        store.dispose()
        params = {"d": chain.datasets["d0"], "job": job, "now": dt.datetime.now(dt.UTC)}
        bare = _bare(
            url,
            [
                "INSERT INTO lot_frontier (job_id, lot, touched_at, failures) "
                "SELECT :job, lot, :now, 0 FROM data_status WHERE role = 'OUTPUT' AND status = 'READY' "
                "ON CONFLICT (job_id, lot) DO UPDATE SET touched_at = excluded.touched_at"
            ],
            params,
        )
        with Lineage.over(Store(url)) as lineage:
            taken, done = _timed(lambda: lineage.gaps.backfill(NS, "j1", **_range(days)))
    return {"lots": sum(r.count for r in done.hinted), "taken": taken, "bare": bare}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=2, help="days of lots per job (default 2; a year: 365)")
    parser.add_argument("--backends", default="postgresql", help="default postgresql; or postgresql,sqlite")
    args = parser.parse_args()
    now = dt.datetime.now(dt.UTC)
    print(
        f"backfill bench, {args.days} days of PT5M lots ({args.days * PER_DAY} per job) x {JOBS} jobs, "
        f"{now:%Y-%m-%d %H:%M} UTC, {machine()}",
        flush=True,
    )
    for backend in args.backends.split(","):
        found = reprocess(backend, args.days)
        lots, taken, bare = found["lots"], found["taken"], found["bare"]
        # The target counts the chain's lots (every job's lot reopened is a lot planned), as a
        # backfill of several assets counts each asset's partitions.
        verdict = "met" if found["all"] / taken >= TARGET else "MISSED"
        print(
            f"{backend:10} reprocess: backfill j0 reopened {lots} lots + {found['all'] - lots} downstream "
            f"in {taken:.2f} s: {lots / taken:,.0f} lots/s of j0 "
            f"({found['all'] / taken:,.0f} lots/s in all); "
            f"bare SQL of the same rows {bare:.2f} s ({found['all'] / bare:,.0f} lots/s), ratio "
            f"{bare / taken:.3f}x; target >= {TARGET:,.0f} lots/s of the chain {verdict}",
            flush=True,
        )
        print(
            f"{backend:10} dry run of it: {found['dry']:.3f} s, {lots / found['dry']:,.0f} lots/s; "
            f"{machine()}",
            flush=True,
        )
        found = missing(backend, args.days)
        lots, taken, bare = found["lots"], found["taken"], found["bare"]
        print(
            f"{backend:10} missing: backfill j1 hinted {lots} lots in {taken:.3f} s: "
            f"{lots / taken:,.0f} lots/s; bare INSERT of the same rows {bare:.3f} s "
            f"({lots / bare:,.0f} lots/s), ratio {bare / taken:.3f}x; "
            f"{machine()}",
            flush=True,
        )


if __name__ == "__main__":
    main()
