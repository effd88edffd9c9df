"""How long does one arrival pass take over 10,000 source datasets of five-minute lots?

    .venv/bin/python -m bench.arrival [--sources 10000] [--repeat 10] [--backends postgresql,sqlite]

A fresh database gets ``--sources`` source datasets, each with an arrival policy (PT5M lots,
``late_after`` PT5M, absent=missing) whose watch has noticed every lot up to T0, and one lot after
T0 delivered for every other source. A pass at T0 + 10 minutes finds one lot due per source: half
delivered, half overdue — the pass reads the policies, reads which of the 10,000 due lots have a
row, moves the 10,000 watches and appends 5,000 OVERDUE events, in one transaction under its lock.
Before each measured pass the watches are put back at T0 (not timed).

Measured: ``ArrivalPass.notice`` (median of ``--repeat`` passes after one warm-up); the baseline
is one plain statement in the same run: the policies joined to their due lot's OUTPUT row, counted
(what any pass has to read at least). Target (issue 38): a pass under 1 s on PostgreSQL.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

import sqlalchemy as sa

from bench._seed import new_uuid
from bench.gaps import database, machine, median_ms
from lotline.domain.clock import ManualClock
from lotline.services import Lineage
from lotline.store.engine import Store
from lotline.store.types import UtcDateTime

NS = "bench"
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
DUE_LOT = "20260101PT5M000"  # 00:00-00:05, due at 00:10
TARGET_MS = 1000.0


def seed(url: str, sources: int) -> None:
    """``sources`` datasets with a policy noticed up to T0; every other one delivered DUE_LOT."""
    store = Store(url)
    lineage = Lineage.over(store)
    lineage.catalog.upsert_namespace(NS, owner_name="bench")
    lineage.catalog.upsert_dataset(NS, "s0")
    lineage.lots.register_job(NS, "land", output="s0")  # a job the delivered rows name
    postgres = url.startswith("postgresql")
    series = (
        "generate_series(1, :count - 1)"
        if postgres
        else "(WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < :count) "
        "SELECT i FROM s)"
    )
    row = "SELECT i FROM " + series + (" AS s(i)" if postgres else "")
    with store.write() as connection:
        uid = new_uuid(connection)
        found = sa.text("SELECT id FROM namespaces WHERE name = :ns").columns(id=sa.Uuid())
        namespace = connection.execute(found, {"ns": NS}).scalar()
        job = connection.execute(
            sa.text("SELECT id FROM jobs WHERE name = 'land'").columns(id=sa.Uuid())
        ).scalar()
        types = {"nsid": sa.Uuid(), "job": sa.Uuid(), "t0": UtcDateTime()}

        def bound(statement: str) -> sa.TextClause:
            return sa.text(statement).bindparams(
                *(sa.bindparam(k, type_=t) for k, t in types.items() if f":{k}" in statement)
            )

        params = {"nsid": namespace, "job": job, "t0": T0, "count": sources}
        connection.execute(
            bound(
                f"INSERT INTO datasets (id, namespace_id, name, type, created_at, updated_at) "
                f"SELECT {uid}, :nsid, 's' || i, 'DB_TABLE', :t0, :t0 FROM ({row}) AS r"
            ),
            params,
        )
        connection.execute(
            bound(
                "INSERT INTO arrival_policies (dataset_id, lot_interval, late_after_seconds, absent, "
                "declared_in, noticed_through, created_at, updated_at) "
                "SELECT d.id, 'PT5M', 300, 'missing', 'bench', :t0, :t0, :t0 FROM datasets d "
                "JOIN namespaces n ON n.id = d.namespace_id WHERE n.name = 'bench'"
            ),
            params,
        )
        connection.execute(
            bound(
                "INSERT INTO data_status (dataset_id, lot, job_id, role, status, attempt, "
                "created_at, updated_at) "
                f"SELECT d.id, '{DUE_LOT}', :job, 'OUTPUT', 'READY', 1, :t0, :t0 FROM datasets d "
                "JOIN namespaces n ON n.id = d.namespace_id "
                "WHERE n.name = 'bench' AND d.name <> 's0' AND CAST(substr(d.name, 2) AS INTEGER) % 2 = 0"
            ),
            params,
        )
    if postgres:
        with store.engine.connect() as connection:
            connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
    lineage.close()


def measure(backend: str, url: str, sources: int, repeat: int) -> dict[str, Any]:
    seed(url, sources)
    now = T0 + dt.timedelta(minutes=10)
    lineage = Lineage.over(Store(url), clock=ManualClock(now))
    reset = sa.text("UPDATE arrival_policies SET noticed_through = :t0").bindparams(
        sa.bindparam("t0", type_=UtcDateTime)
    )
    pushed: list[int] = []

    def one_pass() -> None:
        with lineage.store.write() as connection:
            connection.execute(reset, {"t0": T0})
        pushed.append(len(lineage.arrival_pass.notice().overdue))

    plain_sql = sa.text(
        "SELECT count(*), count(ds.lot) FROM arrival_policies p LEFT JOIN data_status ds "
        f"ON ds.dataset_id = p.dataset_id AND ds.lot = '{DUE_LOT}' AND ds.role = 'OUTPUT'"
    )

    def plain() -> None:
        with lineage.store.read() as connection:
            connection.execute(plain_sql).all()

    def reset_only() -> None:
        with lineage.store.write() as connection:
            connection.execute(reset, {"t0": T0})

    passed = median_ms(one_pass, repeat) - median_ms(reset_only, repeat)
    baseline = median_ms(plain, repeat)
    lineage.close()
    verdict = (
        f"; target < {TARGET_MS:.0f} ms {'met' if passed < TARGET_MS else 'MISSED'}"
        if backend == "postgresql"
        else ""
    )
    print(
        f"{backend:10} arrival pass over {sources} sources ({pushed[-1]} overdue pushed a pass) "
        f"{passed:7.1f} ms; the plain join and count {baseline:6.1f} ms, ratio {passed / baseline:5.1f}x"
        f"{verdict}; {machine()}",
        flush=True,
    )
    return {"pass": passed, "plain": baseline, "pushed": pushed[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sources", type=int, default=10_000, help="source datasets (default 10,000)")
    parser.add_argument("--repeat", type=int, default=10, help="measured passes (median; default 10)")
    parser.add_argument("--backends", default="postgresql", help="default postgresql; or postgresql,sqlite")
    args = parser.parse_args()
    print(f"arrival pass bench, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {machine()}", flush=True)
    for backend in args.backends.split(","):
        with database(backend, "arrival") as url:
            measure(backend, url, args.sources, args.repeat)


if __name__ == "__main__":
    main()
