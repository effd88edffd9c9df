"""Set-based seeding shared by the benchmarks: a chain of registered jobs with years of PT5M lots,
written by ``INSERT … SELECT`` over a series of lot numbers (``generate_series`` on PostgreSQL, a
recursive CTE on SQLite), so 525,600 lots per job take seconds, not a Python loop per row.

The chain: ``j0`` makes ``d0`` from nothing, ``jN`` reads ``d(N-1)`` and makes ``dN``. Rows are as
lotline leaves them after successful claims: an OUTPUT row per lot and dataset, and an INPUT row of
the consumer for each of its READY lots. With ``gaps``, the last job's lots have gaps of every kind
(``LAST_JOB_STATUS``) and its input fails or lacks some lots (``INPUT_STATUS``); failed lots have a
FAILED run with a one-line reason, as a failed claim leaves them (so a report reads the reasons).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy import Connection

from lotline.services import Lineage
from lotline.store import schema
from lotline.store.engine import Store
from lotline.store.types import UtcDateTime

NS = "bench"
DAY0 = dt.date(2023, 1, 1)
PER_DAY = 288

#: The last job's status at day ``d``, ordinal ``o`` (NULL: no row, a missing lot). Missing lots
#: scattered every third day, at 200 every 20th day (its input failed there) and all of day 300
#: (its input never made it); a failure every 10th day; a reopened day, a held hour, running lots.
LAST_JOB_STATUS = """CASE
    WHEN (d % 3 = 0 AND o = (d * 7) % 288) OR (d % 20 = 0 AND o = 200) OR d = 300 THEN NULL
    WHEN d % 10 = 0 AND o = 100 THEN 'ERROR'
    WHEN d = 150 THEN 'RESUBMIT'
    WHEN d = 200 AND o >= 50 AND o < 60 THEN 'HOLD'
    WHEN d = :last_day AND o >= 285 THEN 'RUNNING'
    ELSE 'READY' END"""
#: The last job's input: failed at 200 every 20th day, day 300 never produced.
INPUT_STATUS = "CASE WHEN d = 300 THEN NULL WHEN d % 20 = 0 AND o = 200 THEN 'ERROR' ELSE 'READY' END"
#: The one-line reason of every seeded failure (``runs.error``).
REASON = "ValueError: malformed record in input (bench)"


@dataclass(frozen=True)
class Chain:
    """What was seeded: dataset and job ids by name, rows written, seconds taken."""

    datasets: dict[str, uuid.UUID]
    jobs: dict[str, uuid.UUID]
    rows: int
    seconds: float


def lot(day: int, ordinal: int) -> str:
    return f"{DAY0 + dt.timedelta(days=day):%Y%m%d}PT5M{ordinal:03d}"


def _postgres(connection: Connection) -> bool:
    return connection.dialect.name == "postgresql"


def _series(connection: Connection) -> str:
    """A CTE ``s(i)`` of the numbers 0 .. :count - 1."""
    if _postgres(connection):
        return "WITH s(i) AS (SELECT generate_series(0, :count - 1))"
    return "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < :count)"


def lot_sql(connection: Connection, number: str) -> str:
    """The PT5M lot id of lot ``number`` (0 = the first lot of DAY0), in SQL."""
    if _postgres(connection):
        day = f"to_char(DATE '{DAY0:%Y-%m-%d}' + ({number}) / 288, 'YYYYMMDD')"
        return f"{day} || 'PT5M' || lpad((({number}) % 288)::text, 3, '0')"
    day = f"strftime('%Y%m%d', '{DAY0:%Y-%m-%d}', '+' || (({number}) / 288) || ' days')"
    return f"{day} || 'PT5M' || substr('00' || (({number}) % 288), -3)"


def new_uuid(connection: Connection) -> str:
    """A random UUID as the ``Uuid`` column stores it."""
    return "gen_random_uuid()" if _postgres(connection) else "lower(hex(randomblob(16)))"


def json_sql(connection: Connection, parameter: str) -> str:
    """A JSON document from a text parameter, as the ``JsonDocument`` column stores it."""
    return f"CAST({parameter} AS jsonb)" if _postgres(connection) else parameter


def _run_id(connection: Connection, number: str) -> str:
    """The seeded run of the job's lot ``number``: derived from both, so rows name it without a join."""
    if _postgres(connection):
        return f"CAST(left(:job_hex, 20) || lpad(to_hex({number}), 12, '0') AS uuid)"
    return f"substr(:job_hex, 1, 20) || printf('%012x', {number})"


_TYPES = {"ds": sa.Uuid(), "input": sa.Uuid(), "job": sa.Uuid(), "now": UtcDateTime()}


def _bind(statement: str) -> sa.TextClause:
    """The statement with its UUID and time parameters typed, as each database stores them."""
    text = sa.text(statement)
    return text.bindparams(*(sa.bindparam(k, type_=t) for k, t in _TYPES.items() if f":{k}" in statement))


def _lots(connection: Connection, status: str) -> str:
    """The job's lots that have a row: number ``i``, ``lot`` and ``status``."""
    return f"""{_series(connection)}
        SELECT i, lot, status FROM (
            SELECT i, {lot_sql(connection, "i")} AS lot, {status} AS status
            FROM (SELECT i, i / 288 AS d, i % 288 AS o FROM s) AS n) AS numbered
        WHERE status IS NOT NULL"""


def _outputs(connection: Connection, status: str, runs: str, params: dict[str, object]) -> int:
    """The job's OUTPUT rows, and the run of each claim (``runs``: "all", or "failed" ones only)."""
    with_run = "TRUE" if runs == "all" else "status = 'ERROR'"
    lots = _lots(connection, status)
    made = f"""INSERT INTO runs (id, job_id, lot, state, error, created_at, updated_at)
        SELECT {_run_id(connection, "i")}, :job, lot,
               CASE status WHEN 'ERROR' THEN 'FAILED' WHEN 'RUNNING' THEN 'RUNNING' ELSE 'COMPLETED' END,
               CASE WHEN status = 'ERROR' THEN :reason END, :now, :now
        FROM ({lots}) AS rows WHERE {with_run}"""
    connection.execute(_bind(made), {**params, "reason": REASON})
    rows = f"""INSERT INTO data_status (dataset_id, lot, job_id, role, status, held_status, attempt, owner,
                                        run_id, created_at, updated_at)
        SELECT :ds, lot, :job, 'OUTPUT', status, CASE WHEN status = 'HOLD' THEN 'READY' END, 1, 'seed',
               CASE WHEN {with_run} THEN {_run_id(connection, "i")} END, :now, :now
        FROM ({lots}) AS rows"""
    return connection.execute(_bind(rows), params).rowcount


def _inputs(connection: Connection, params: dict[str, object]) -> int:
    """The consumer's INPUT row of its input's lot, for each READY lot it made, in the same claim."""
    statement = """INSERT INTO data_status (dataset_id, lot, job_id, role, status, attempt, owner, run_id,
                                           created_at, updated_at)
        SELECT :input, lot, job_id, 'INPUT', 'DONE', 1, 'seed', run_id, :now, :now FROM data_status
        WHERE dataset_id = :ds AND role = 'OUTPUT' AND status = 'READY'"""
    return connection.execute(_bind(statement), params).rowcount


def analyze(store: Store) -> None:
    """Refresh the planner's statistics, as autovacuum would after a bulk load."""
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM ANALYZE" if store.backend == "postgresql" else "ANALYZE")


def seeded_chain(url: str) -> Chain | None:
    """The chain a kept database was seeded with earlier (``--keep``), None if it has none yet."""
    store = Store(url)
    try:
        with store.read() as connection:
            ids = dict(connection.execute(sa.select(schema.datasets.c.name, schema.datasets.c.id)).all())
            job_ids = dict(connection.execute(sa.select(schema.jobs.c.name, schema.jobs.c.id)).all())
    finally:
        store.dispose()
    return Chain(ids, job_ids, 0, 0.0) if ids else None


def seed_chain(url: str, jobs: int, days: int, *, gaps: bool = True, runs: str = "failed") -> Chain:
    """Register the chain of ``jobs`` jobs and write ``days`` days of PT5M lots for each; ``runs``:
    a run for every claim ("all": what invalidation follows downstream) or for failed ones only."""
    began = time.monotonic()
    lineage = Lineage.over(Store(url))
    lineage.catalog.upsert_namespace(NS)
    for n in range(jobs):
        lineage.catalog.upsert_dataset(NS, f"d{n}")
        lineage.lots.register_job(NS, f"j{n}", output=f"d{n}", inputs=[f"d{n - 1}"] if n else [])
    lineage.close()
    store = Store(url)
    written = 0
    with store.write() as connection:
        if connection.dialect.name == "postgresql":  # the rows reference what was just made: no FK checks
            connection.exec_driver_sql("SET LOCAL session_replication_role = replica")
        ids = dict(connection.execute(sa.select(schema.datasets.c.name, schema.datasets.c.id)).all())
        job_ids = dict(connection.execute(sa.select(schema.jobs.c.name, schema.jobs.c.id)).all())
        for n in range(jobs):
            status = "'READY'"
            if gaps and n == jobs - 1:
                status = LAST_JOB_STATUS
            elif gaps and n == jobs - 2:
                status = INPUT_STATUS
            params: dict[str, object] = {
                "ds": ids[f"d{n}"],
                "job": job_ids[f"j{n}"],
                "input": ids[f"d{n - 1}"] if n else None,
                "now": dt.datetime.now(dt.UTC),
                "count": days * PER_DAY,
                "last_day": days - 1,
                "job_hex": job_ids[f"j{n}"].hex,
            }
            written += _outputs(connection, status, runs, params)
            if n:
                written += _inputs(connection, params)
    analyze(store)
    store.dispose()
    return Chain(ids, job_ids, written, time.monotonic() - began)
