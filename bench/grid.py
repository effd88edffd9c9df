"""How long do the web UI's lot grid and lots x jobs matrix take over years of five-minute lots?

    .venv/bin/python -m bench.grid [--years 1] [--repeat 20] [--backends postgresql,sqlite] [--page]
                                   [--keep NAME]

The database of ``bench.gaps`` (a chain of 10 registered jobs with ``--years`` of PT5M lots each
from 2023-01-01, the last job's lots with gaps of every kind; ``bench/_seed.py``, set-based), plus
what a grid reads besides the report: a current dataset version and a manifest for each READY lot
of the last job's dataset (as publishing leaves them), one in 20 of them empty; and the last job's
code changed after its first version made the READY lots of the last 30 days (``STALE_DAYS``):
8,640 stale lots (fewer of them READY where the seed left gaps), which every report and grid counts.

Measured, median of ``--repeat`` calls after two warm-ups:

- ``GapService.grid`` of the last job over the whole range with no resolution asked (the automatic
  one: a day per cell), next to the baseline it cannot beat, measured in the same run:
  ``GapService.report`` over the same range (the grid is that report, the empty lots, and the
  cells); the plain SQL count of ``bench.gaps``, and the grid's own parts: the empty lots' read
  (``store.queries.gaps.empty_lots``) and building the cells (``domain.grid.build``); the grid per
  hour of the last year (8,760 cells, the finest a year may have).
- The same gap report and grid **to now**: from the first lot up to the moment of the run (lots
  after the seeded years are missing, those not due yet pending; seeded lots after now are left
  out), as ``lotline gaps`` and the pages count by default (issue 38).
- ``GapService.matrix`` of the namespace (the lots x jobs matrix: 10 rows of a day per cell over the
  page's default range, the last 366 days), next to the gap reports of its 10 jobs over that range;
  with ``--page``, also ``GET /lots?ns=bench`` (the matrix page, HTML) from ``lotline serve`` in its
  own process.

PostgreSQL is reached at LOTLINE_TEST_PG_URL (default postgres@127.0.0.1:5432); the benchmark
creates and drops its own database (``--keep NAME``: seeds the PostgreSQL database NAME once, its
manifests included, and reuses it later). Targets: a year's grid < 300 ms (issue 19), five years'
grid per day < 500 ms (issues 28 and 31), the matrix page of 10 jobs x a year per day < 500 ms
(issue 28), on PostgreSQL.
"""

from __future__ import annotations

import argparse
import datetime as dt
import uuid
from typing import Any

import requests
import sqlalchemy as sa

from bench._seed import NS, PER_DAY, analyze, json_sql, lot, new_uuid, seed_chain, seeded_chain
from bench._server import serve
from bench.gaps import JOBS, KEEP_HELP, database, days_of, machine, median_ms, plain_count, span
from lotline.domain import gaps as g
from lotline.domain import grid as lot_grid
from lotline.domain.lots import Interval
from lotline.services import Lineage
from lotline.store import schema
from lotline.store.engine import Store
from lotline.store.queries import gaps
from lotline.store.types import UtcDateTime

#: One lot in this many of the last job's READY lots is published empty.
EMPTY_EVERY = 20
#: The last job's READY lots of this many last days were made by its version 1, before its code
#: changed (version 2): stale lots, counted by every report, grid and matrix (issue 40.3).
STALE_DAYS = 30
TARGET_MS = {1: 300.0, 5: 500.0}
MATRIX_TARGET_MS = 500.0
PORT = 5097


def _seed_manifests(url: str, dataset_id: Any) -> int:
    """A current version and a manifest for each READY lot of the last job's dataset."""
    store = Store(url)
    with store.write() as connection:
        versions = f"""INSERT INTO dataset_versions (id, dataset_id, version_number, lot, state, created_at)
            SELECT {new_uuid(connection)}, dataset_id, row_number() OVER (ORDER BY lot), lot, 'current', :now
            FROM data_status WHERE dataset_id = :ds AND role = 'OUTPUT' AND status = 'READY'"""
        found = f"""INSERT INTO manifests (id, dataset_id, lot, version_id, attempt, state, uri_type,
                                           location, objects, object_count, total_bytes, row_count,
                                           created_at, updated_at)
            SELECT {new_uuid(connection)}, dataset_id, lot, id, 1,
                   CASE WHEN e THEN 'empty' ELSE 'complete' END,
                   'path', '/warehouse/{NS}/d{JOBS - 1}/' || lot || '/attempt-1',
                   CASE WHEN e THEN {json_sql(connection, ":none")} ELSE {json_sql(connection, ":one")} END,
                   CASE WHEN e THEN 0 ELSE 1 END, CASE WHEN e THEN 0 ELSE 1000 END,
                   CASE WHEN e THEN 0 ELSE 10 END, :now, :now
            FROM (SELECT id, dataset_id, lot, version_number % {EMPTY_EVERY} = 0 AS e
                  FROM dataset_versions WHERE dataset_id = :ds) AS v"""
        params = {
            "ds": dataset_id,
            "now": dt.datetime.now(dt.UTC),
            "none": "[]",
            "one": '[{"uri": "part-0.parquet", "size": 1000}]',
        }
        binds = (sa.bindparam("ds", type_=sa.Uuid()), sa.bindparam("now", type_=UtcDateTime))
        made = connection.execute(sa.text(versions).bindparams(*binds), params).rowcount
        connection.execute(sa.text(found).bindparams(*binds), params)
    analyze(store)
    store.dispose()
    return 2 * made


def _seed_stale(url: str, job: str, dataset_id: Any, days: int) -> int:
    """The last job's code changes (a new version, as the runner registers it), after its version 1
    made the READY lots of the last ``STALE_DAYS`` days: each gets a run of version 1 (the seed's
    runs have no version: not stale). Once per database (a kept one has it already)."""
    lineage = Lineage.over(Store(url))
    with lineage.store.read() as connection:
        job_id = connection.execute(sa.select(schema.jobs.c.id).where(schema.jobs.c.name == job)).scalar_one()
        versions = gaps.job_versions_of(connection, job_id)
    if len(versions.numbers) > 1:
        lineage.close()
        return 0
    old = versions.current
    lineage.lots.register_job(NS, job, output=f"d{JOBS - 1}", inputs=[f"d{JOBS - 2}"], code_digest="changed")
    lineage.close()
    store = Store(url)
    ds = schema.data_status
    now = dt.datetime.now(dt.UTC)
    with store.write() as connection:
        lots = (
            connection.execute(
                sa.select(ds.c.lot).where(
                    ds.c.dataset_id == dataset_id,
                    ds.c.role == "OUTPUT",
                    ds.c.status == "READY",
                    ds.c.lot >= lot(days - STALE_DAYS, 0),
                )
            )
            .scalars()
            .all()
        )
        made = [{"id": uuid.uuid4(), "lot": found} for found in lots]
        rows = [
            {
                "id": m["id"],
                "job_id": job_id,
                "job_version_id": old,
                "lot": m["lot"],
                "state": "COMPLETED",
                "created_at": now,
                "updated_at": now,
            }
            for m in made
        ]
        connection.execute(sa.insert(schema.runs), rows)
        connection.execute(
            sa.update(ds)
            .where(ds.c.dataset_id == dataset_id, ds.c.role == "OUTPUT", ds.c.lot == sa.bindparam("b_lot"))
            .values(run_id=sa.bindparam("b_run")),
            [{"b_lot": m["lot"], "b_run": m["id"]} for m in made],
        )
    analyze(store)
    store.dispose()
    return len(made)


def _page_ms(url: str, repeat: int) -> float:
    """``GET /lots?ns=`` (the matrix page) from a served process, median of ``repeat``."""
    with serve(url, PORT) as (base, _), requests.Session() as session:

        def page() -> None:
            answer = session.get(f"{base}/lots", params={"ns": NS}, timeout=120)
            if answer.status_code != 200:
                raise RuntimeError(f"GET /lots answered {answer.status_code}: {answer.text[:200]}")

        return median_ms(page, repeat)


def measure(backend: str, url: str, years: int, repeat: int, page: bool) -> dict[str, Any]:
    days = days_of(years)
    kept = seeded_chain(url)
    chain = kept or seed_chain(url, JOBS, days)
    dataset_id = chain.datasets[f"d{JOBS - 1}"]
    seeded = chain.rows + (0 if kept else _seed_manifests(url, dataset_id))
    seeded += _seed_stale(url, f"j{JOBS - 1}", dataset_id, days)
    lineage = Lineage.over(Store(url))
    job, whole = f"j{JOBS - 1}", span(days)
    last_year = {"start": (dt.date.fromisoformat(whole["end"]) - dt.timedelta(days=365)).isoformat()}
    last_year["end"] = whole["end"]
    now = dt.datetime.now(dt.UTC)

    def grid() -> Any:
        return lineage.gaps.grid(NS, job=job, **whole)

    def hourly() -> Any:
        return lineage.gaps.grid(NS, job=job, resolution="hour", **last_year)

    def report() -> Any:
        return lineage.gaps.report(NS, job=job, **whole)

    def report_to_now() -> Any:  # from the first lot up to now: what `lotline gaps --from …` reads
        return lineage.gaps.report(NS, job=job, start=whole["start"])

    def grid_to_now() -> Any:  # the grid from the first lot up to now (a day per cell)
        return lineage.gaps.grid(NS, job=job, start=whole["start"], end=dt.datetime.now(dt.UTC).isoformat())

    def matrix() -> Any:
        return lineage.gaps.matrix(NS, now=now)

    shown = matrix().range
    if shown is None:
        raise RuntimeError("the matrix found no range: nothing seeded?")
    matrix_span = {"start": shown.start.isoformat(), "end": shown.end.isoformat()}

    def reports() -> Any:  # what the matrix cannot beat: each row's gap report
        return [lineage.gaps.report(NS, job=f"j{n}", **matrix_span) for n in range(JOBS)]

    # Where the grid's time goes beyond the report: the empty lots' read, and building the cells.
    pattern, first, last = g.id_pattern(Interval(5)), lot(0, 0), lot(days - 1, PER_DAY - 1)

    def empty() -> list[str]:
        with lineage.store.read() as connection:
            return gaps.empty_lots(connection, dataset_id, first, last, pattern)

    def stale() -> Any:  # what counting stale lots adds to a report: the job's versions, their lots
        with lineage.store.read() as connection:
            job_id = connection.execute(
                sa.select(schema.jobs.c.id).where(schema.jobs.c.name == job)
            ).scalar_one()
            versions = gaps.job_versions_of(connection, job_id)
            return gaps.stale_lots(connection, dataset_id, versions.older, first, last, pattern)

    made, empties = report(), empty()
    found = grid()
    totals = ", ".join(f"{s.value} {n}" for s, n in found.totals().items() if n)
    shape = f"{len(found.cells)} cells per {found.resolution.value}, {found.report.total} lots"
    result = {
        "seeded": f"{seeded} rows in {chain.seconds:.0f} s (+ manifests)",
        "grid": median_ms(grid, repeat),
        "report": median_ms(report, repeat),
        "plain": median_ms(plain_count(lineage, dataset_id, days), repeat),
        "empty": median_ms(empty, repeat),
        "stale": median_ms(stale, repeat),
        "stale_lots": len(stale()),
        "build": median_ms(lambda: lot_grid.build(made, empties), repeat),
        "hourly": median_ms(hourly, repeat),
        "matrix": median_ms(matrix, repeat),
        "report_to_now": median_ms(report_to_now, repeat),
        "grid_to_now": median_ms(grid_to_now, repeat),
        "reports": median_ms(reports, repeat),
        "matrix_range": f"{shown.start:%Y-%m-%d}..{shown.end:%Y-%m-%d}",
        "found": f"{shape}: {totals}",
        "to_now": _to_now(report_to_now()),
    }
    lineage.close()
    _print(backend, years, result)
    if page:  # printed as soon as measured: the service figures above are kept if serving fails
        result["page"] = _page_ms(url, repeat)
        print(
            f"{backend:10} GET /lots?ns={NS} (matrix page, HTML) {result['page']:7.1f} ms, "
            f"ratio to the matrix {result['page'] / result['matrix']:5.2f}x"
            f"{_verdict(result['page'], MATRIX_TARGET_MS if backend == 'postgresql' else None)}; {machine()}",
            flush=True,
        )
    return result


def _print(backend: str, years: int, found: dict[str, Any]) -> None:
    grid_ms, report_ms, matrix_ms = found["grid"], found["report"], found["matrix"]
    postgres = backend == "postgresql"
    grid_target = TARGET_MS.get(years) if postgres else None
    print(f"{backend:10} seeded {found['seeded']}; grid {found['found']}", flush=True)
    print(
        f"{backend:10} grid (auto) {grid_ms:7.1f} ms, gap report {report_ms:7.1f} ms, "
        f"ratio {grid_ms / report_ms:5.2f}x; one plain SQL count {found['plain']:6.1f} ms, "
        f"ratio {grid_ms / found['plain']:5.2f}x{_verdict(grid_ms, grid_target)}",
        flush=True,
    )
    print(
        f"{backend:10} of which beyond the report: empty lots read {found['empty']:6.1f} ms, "
        f"cells built {found['build']:6.1f} ms; the last year's grid per hour (8,760 cells) "
        f"{found['hourly']:6.1f} ms; within the report, its {found['stale_lots']} stale lots read "
        f"{found['stale']:6.1f} ms",
        flush=True,
    )
    print(
        f"{backend:10} to now (from the first lot, {found['to_now']}): "
        f"gap report {found['report_to_now']:7.1f} ms, "
        f"ratio to the plain count {found['report_to_now'] / found['plain']:5.2f}x"
        f"{_verdict(found['report_to_now'], grid_target)}; grid per day {found['grid_to_now']:7.1f} ms"
        f"{_verdict(found['grid_to_now'], grid_target)}",
        flush=True,
    )
    print(
        f"{backend:10} matrix of {JOBS} jobs ({found['matrix_range']}, per day) {matrix_ms:7.1f} ms, "
        f"their {JOBS} gap reports {found['reports']:7.1f} ms, "
        f"ratio {matrix_ms / found['reports']:5.2f}x, "
        f"to the plain count {matrix_ms / found['plain']:5.2f}x"
        f"{_verdict(matrix_ms, MATRIX_TARGET_MS if postgres else None)}; {machine()}",
        flush=True,
    )


def _to_now(report: Any) -> str:
    counts = ", ".join(f"{s.value} {n}" for s, n in report.counts.items() if n)
    return f"{report.total} lots: {counts}"


def _verdict(figure: float, target: float | None) -> str:
    if target is None:
        return ""
    return f"; target < {target:.0f} ms {'met' if figure < target else 'MISSED'}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--years", type=int, default=1, help="years of lots per job (1 or 5; default 1)")
    parser.add_argument("--repeat", type=int, default=20, help="measured calls (median; default 20)")
    parser.add_argument("--backends", default="postgresql", help="default postgresql; or postgresql,sqlite")
    parser.add_argument("--page", action="store_true", help="also GET /lots?ns= from a served process")
    parser.add_argument("--keep", metavar="NAME", help=KEEP_HELP)
    args = parser.parse_args()
    days = days_of(args.years)
    now = dt.datetime.now(dt.UTC)
    print(
        f"lot grid bench, {args.years} year(s) of PT5M lots ({days * PER_DAY} per job) x {JOBS} jobs, "
        f"{now:%Y-%m-%d %H:%M} UTC, {machine()}",
        flush=True,
    )
    for backend in args.backends.split(","):
        with database(backend, "grid", args.keep) as url:
            measure(backend, url, args.years, args.repeat, args.page)
        print(f"{backend:10} {machine()}", flush=True)


if __name__ == "__main__":
    main()
