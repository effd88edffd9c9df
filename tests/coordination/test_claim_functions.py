"""The PostgreSQL claim functions (migrations 0006 to 0016) write exactly what the Python path writes.

One history — claims of next lots, completions, a failure and its retry (after an operator's
release: a failed lot's own retry waits for its back-off), a completion after the
lease ran out, an invalidation, a consumer job, and the cases the functions hand back to Python —
is replayed twice on PostgreSQL: once statement by statement (``database_functions=False``) and
once through the functions. Every row written is then compared, with generated ids replaced by
what they stand for (a run by its job, lot and attempt; a version by its dataset and number) and
wall-clock times left out.
"""

from __future__ import annotations

import dataclasses
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from lotline.domain.errors import Conflict
from lotline.domain.model import DatasetRef
from lotline.domain.runs import RunAction
from lotline.services import Lineage
from lotline.services.lots import LotService
from lotline.store.drivers import DirectConnections
from lotline.store.engine import Store
from lotline.store.queries import claim_functions
from support.lots import LotWorld

pytestmark = pytest.mark.postgres

LOTS = [f"20260101PT1H{hour:03d}" for hour in range(6)]


def _replay(lineage: Lineage) -> None:
    world = LotWorld(lineage)
    world.job("land", output="raw")
    world.job("clean", output="tidy", inputs=["raw"])
    world.job("report", output="summary", inputs=["tidy"])
    lineage.catalog.upsert_dataset(world.ns, "lookup")
    world.produce("land", *LOTS)
    lots = lineage.lots

    first = world.claim("clean")  # not cached yet: the Python path, which fills the cache
    assert first is not None and first.lot == LOTS[0]
    lots.complete(first)
    second = world.claim("clean")
    assert second is not None and second.lot == LOTS[1]
    lots.fail(second, error="boom\nstack")
    # Its retry hint waits out the back-off; an operator's hold and release make it due at once.
    lots.hold_lot(world.ns, "tidy", LOTS[1])
    lots.release_lot(world.ns, "tidy", LOTS[1])
    # Meanwhile a job outside coordination writes that lot: the retry's version supersedes it.
    lineage.catalog.upsert_job(world.ns, "by-hand", outputs=[DatasetRef(world.ns, "tidy")])
    by_hand = lineage.runs.create_run(world.ns, "by-hand", lot=LOTS[1])
    lineage.runs.transition(by_hand.id, RunAction.START)
    lineage.runs.transition(by_hand.id, RunAction.COMPLETE)
    retry = world.claim("clean")
    assert retry is not None and (retry.lot, retry.attempt) == (LOTS[1], 2)
    lots.complete(retry)

    late = lots.claim("worker-2", world.ns, "clean", lease=timedelta(milliseconds=1))
    assert late is not None and late.lot == LOTS[2]
    time.sleep(0.01)
    with pytest.raises(Conflict, match="no longer a live claim"):
        lots.complete(late)
    assert lots.reap() == 1

    # A run that also wrote an undeclared output: the end of its claim is not the common case.
    extra = world.claim("clean")
    assert extra is not None and extra.lot == LOTS[2]
    lineage.runs.record_outputs(extra.run_id, [DatasetRef(world.ns, "lookup", extra.lot)])
    lots.complete(extra)

    for _ in range(2):
        claim = world.claim("report")
        assert claim is not None
        lots.complete(claim)

    lots.invalidate(world.ns, "raw", LOTS[0])
    world.produce("land", LOTS[0])
    redo = world.claim("clean")
    assert redo is not None and (redo.lot, redo.attempt) == (LOTS[0], 2)
    lots.complete(redo)

    # The job's current version now also reads "lookup", which has no version yet at these lots
    # (rule 1 creates one): the claim functions leave that to Python.
    lineage.catalog.upsert_job(
        world.ns,
        "clean",
        inputs=[DatasetRef(world.ns, "raw"), DatasetRef(world.ns, "lookup")],
        outputs=[DatasetRef(world.ns, "tidy")],
    )
    while (claim := world.claim("clean")) is not None:
        lots.complete(claim)
    assert world.claim("report") is not None


def _snapshot(store: Store) -> dict[str, Any]:
    """Every row the history wrote, ids replaced by what they stand for, wall-clock times left out."""
    with store.read() as connection:
        query = connection.exec_driver_sql

        def names(table: str) -> dict[uuid.UUID, str]:
            return {row[0]: row[1] for row in query(f"SELECT id, name FROM {table}")}

        datasets, jobs = names("datasets"), names("jobs")
        runs: dict[uuid.UUID, tuple[str, str, int]] = {}
        seen: Counter[tuple[str, str]] = Counter()
        for run_id, job_id, lot in query("SELECT id, job_id, lot FROM runs ORDER BY created_at, id"):
            seen[(jobs[job_id], lot)] += 1
            runs[run_id] = (jobs[job_id], lot, seen[(jobs[job_id], lot)])
        versions = {
            row[0]: (datasets[row[1]], row[2])
            for row in query("SELECT id, dataset_id, version_number FROM dataset_versions")
        }

        def run(run_id: uuid.UUID | None) -> object:
            return None if run_id is None else runs[run_id]

        def version(version_id: uuid.UUID | None) -> object:
            return None if version_id is None else versions[version_id]

        def rows(sql: str, shape: Any) -> list[Any]:
            return sorted((shape(*row) for row in query(sql)), key=repr)

        return {
            "runs": rows(
                "SELECT id, job_version_id IS NULL, lot, state, started_at IS NULL, ended_at IS NULL, "
                "args, facets, parent_run_id FROM runs",
                lambda i, *rest: (run(i), *rest[:-2], _timeless(rest[-2]), rest[-1]),
            ),
            "transitions": rows(
                "SELECT run_id, state, count(*) FROM run_transitions GROUP BY run_id, state",
                lambda r, state, n: (run(r), state, n),
            ),
            "run_inputs": rows(
                "SELECT run_id, dataset_id, lot, dataset_version_id FROM run_inputs",
                lambda r, d, lot, v: (run(r), datasets[d], lot, version(v)),
            ),
            "run_outputs": rows(
                "SELECT run_id, dataset_id, lot, dataset_version_id FROM run_outputs",
                lambda r, d, lot, v: (run(r), datasets[d], lot, version(v)),
            ),
            "versions": rows(
                "SELECT dataset_id, version_number, lot, run_id, state, fields FROM dataset_versions",
                lambda d, n, lot, r, state, fields: (datasets[d], n, lot, run(r), state, fields),
            ),
            "counters": rows(
                "SELECT d.name, coalesce(c.last_version_number, 0) FROM datasets d "
                "LEFT JOIN dataset_version_counters c ON c.dataset_id = d.id",
                lambda *row: row,
            ),
            "data_status": rows(
                "SELECT dataset_id, lot, job_id, role, status, held_status, attempt, owner, "
                "lease_expires_at IS NULL, run_id, data_removed_at IS NULL FROM data_status",
                lambda d, lot, j, *rest: (datasets[d], lot, jobs[j], *rest[:-2], run(rest[-2]), rest[-1]),
            ),
            "frontier": rows(
                "SELECT job_id, lot, not_before IS NULL, failures FROM lot_frontier",
                lambda j, lot, *rest: (jobs[j], lot, *rest),
            ),
            "lot_events": rows(
                "SELECT dataset_id, lot, kind, version_id, run_id, attempt, reason FROM lot_events",
                lambda d, lot, kind, v, r, attempt, reason: (
                    (datasets[d], lot, kind, version(v), run(r), attempt),
                    # The reaper's reason names when the worker last heartbeat: a wall-clock time.
                    None if reason is None else re.sub(r" at [^(]+ \(", " at <time> (", reason),
                ),
            ),
        }


def _timeless(facets: dict[str, Any]) -> dict[str, Any]:
    """A reaped run's error message names the wall-clock time of its claim's last heartbeat."""
    error = facets.get("errorMessage")
    if error is None:
        return facets
    message = re.sub(r"at \d{4}-[^(]+ \(", "at <time> (", error["message"])
    return {**facets, "errorMessage": {**error, "message": message}}


def _run(new_database: Callable[[str], str], *, in_database: bool) -> tuple[dict[str, Any], Counter[str]]:
    store = Store(new_database("postgresql"))
    calls: Counter[str] = Counter()
    call = claim_functions._call

    def counted(connections: DirectConnections, statement: str, params: tuple[Any, ...]) -> Any:
        for function in ("lotline_claim_next_lot", "lotline_finish_claim"):
            calls[function] += function in statement
        return call(connections, statement, params)

    base = Lineage.over(store)
    lineage = dataclasses.replace(
        base, lots=LotService(store, base.manifests, database_functions=in_database)
    )
    try:
        with pytest.MonkeyPatch.context() as patched:
            patched.setattr(claim_functions, "_call", counted)
            _replay(lineage)
        return _snapshot(store), calls
    finally:
        lineage.close()


def test_the_claim_functions_write_what_the_python_path_writes(new_database: Callable[[str], str]) -> None:
    expected, python_calls = _run(new_database, in_database=False)
    found, database_calls = _run(new_database, in_database=True)
    assert sum(python_calls.values()) == 0
    # Most of the history went through the functions (the rest fell back, as the cases above want).
    assert database_calls["lotline_claim_next_lot"] >= 8
    assert database_calls["lotline_finish_claim"] >= 10
    for table, rows in expected.items():
        assert found[table] == rows, table
