"""``lotline worker``: the loop in process (shared Spark session), the shared back-off, and the command as
real processes — stopped by SIGTERM, and SIGKILLed mid-lot with its lot taken over after the lease."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import requests

from api.conftest import AUTH, _serve
from lotline.domain.clock import ManualClock
from lotline.domain.coordination import FIRST_RETRY, Status
from lotline.domain.manifests import ManifestState
from lotline.domain.runs import RunState
from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.spark.runner import LotResult, LotRunner
from lotline.spark.worker import Worker
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from spark.test_processes import SPARK_CONF, eight_half_hours
from support.databases import ON_POSTGRESQL
from support.polling import wait_until
from support.spark import PIPELINES, ingest
from support.waiting import start_waiting

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow  # Spark in processes of their own

NS = "weblogs"
HALF = ["20230101PT30M000", "20230101PT30M001"]


def test_the_loop_runs_lots_as_they_arrive_and_waits_out_a_failing_one_s_back_off(
    lineage: Lineage, spark: SparkSession
) -> None:
    clock = ManualClock()
    timed = Lineage.over(lineage.store, lineage.storage, clock=clock)
    pipeline = load_pipeline(str(PIPELINES / "weblogs.py"))
    register(timed, pipeline)
    ingest(timed, NS, "raw_logs", HALF[0], [["2023-01-01T00:01:00 /a 200"]])
    ingest(timed, NS, "raw_logs", HALF[1], [["2023-01-01T00:31:00 /a 599"]])  # attempt 1 fails
    worker = Worker(LotRunner(timed, pipeline, spark), pipeline.ordered_jobs(), name="w", poll=0.2)
    tally = worker.run(threading.Event(), idle_exit=1.0)
    assert (tally.done, tally.failed) == (1, 1)  # the failing lot was not retried at once
    statuses = {s.lot: s.status for s in timed.lots.status(NS, job="parse")}
    assert statuses == {HALF[0]: Status.READY, HALF[1]: Status.ERROR}

    clock.advance(FIRST_RETRY)  # its time has come: the retry (attempt 2) succeeds
    tally = worker.run(threading.Event(), idle_exit=1.0)
    assert timed.lots.counts(NS, "parse") == {Status.READY: 2}
    assert timed.lots.counts(NS, "hourly_counts") == {Status.READY: 1}


def _start_worker(
    tmp_path: Path, db_url: str, warehouse: Path, *args: str, pipeline: str = "slow.py"
) -> subprocess.Popen[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")},
        "LOTLINE_DB_URL": db_url,
        "LOTLINE_WAREHOUSE": str(warehouse),
        "LOTLINE_SPARK_MASTER": "local[1]",
        "LOTLINE_SPARK_CONF": SPARK_CONF,
    }
    command = [sys.executable, "-m", "lotline", "worker", str(PIPELINES / pipeline), "--poll", "0.5", *args]
    return subprocess.Popen(
        command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_a_killed_worker_s_lot_is_redone_by_another_and_sigterm_stops_cleanly(
    backend_url: str, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    with Lineage.over(Store(backend_url), Storage(str(warehouse))) as lineage:
        register(lineage, load_pipeline(str(PIPELINES / "slow.py")))
        ingest(lineage, "slow", "events", HALF[0], [["a", "b", "c"]])
        first = _start_worker(tmp_path, backend_url, warehouse, "--lease", "3")
        try:
            wait_until(
                lambda: lineage.lots.counts("slow", "copy").get(Status.RUNNING) == 1,
                timeout=120,
                what="the lot to run",
            )
            time.sleep(1.0)  # inside the slow transform (it sleeps 600 s on attempt 1)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        finally:
            if first.poll() is None:
                first.kill()
        assert lineage.manifests.current("slow", "copies", HALF[0]) is None  # nothing visible

        second = _start_worker(tmp_path, backend_url, warehouse, "--lease", "3")
        try:
            wait_until(
                lambda: lineage.lots.counts("slow", "copy") == {Status.READY: 1},
                timeout=120,
                what="the lot redone",
            )
            second.send_signal(signal.SIGTERM)
            out, err = second.communicate(timeout=60)
        finally:
            if second.poll() is None:
                second.kill()
        assert second.returncode == 0, err[-2000:]
        assert "stopped" in out

        manifest = lineage.manifests.current("slow", "copies", HALF[0])
        assert manifest is not None and manifest.attempt == 2 and manifest.state is ManifestState.COMPLETE
        assert all("/attempt=2/" in o.uri for o in manifest.objects) and manifest.row_count == 3
        runs = sorted(lineage.runs.list_runs("slow", "copy").items, key=lambda r: r.created_at)
        assert [r.state for r in runs] == [RunState.FAILED, RunState.COMPLETED]  # reaped, then redone


# Once, on SQLite: the refusals of a live and of an expired claim's completion, and the reaping, are
# store behaviour contract-tested on both databases (tests/coordination/test_claims.py).
@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_a_dead_workers_run_cannot_be_completed_through_the_api_until_a_worker_reaps_it(
    backend_url: str, tmp_path: Path
) -> None:
    """Issue 39.13 (29.1's scenario): a worker's claim expires (it died) and someone completes the
    run through the REST API before any reaper ran: refused, as while the claim was live (it used
    to make the run COMPLETED with a version and no data). A worker started then reaps the lot
    (the run FAILED), runs it again and exits 0."""
    warehouse = tmp_path / "warehouse"
    lineage = Lineage.over(Store(backend_url), Storage(str(warehouse)))
    server, thread, url = _serve(backend_url)
    try:
        register(lineage, load_pipeline(str(PIPELINES / "slow.py")))
        ingest(lineage, "slow", "events", HALF[0], [["a", "b", "c"]])
        claim = lineage.lots.claim("dead-worker", "slow", "copy", lease=timedelta(hours=1))
        assert claim is not None
        complete = f"{url}/api/v1/jobs/runs/{claim.run_id}/complete"
        refused = requests.post(complete, headers=AUTH, timeout=30)
        assert refused.status_code == 409 and "belongs to a claim" in refused.json()["message"], refused.text
        assert "dead-worker" in refused.json()["message"]
        # The worker dies: its last heartbeat leaves a lease that runs out at once.
        beaten = lineage.lots.heartbeat(claim, lease=timedelta(milliseconds=1))
        wait_until(
            lambda: datetime.now(UTC) > beaten.lease_expires_at, timeout=30, what="the lease to expire"
        )
        refused = requests.post(complete, headers=AUTH, timeout=30)
        assert refused.status_code == 409 and "run out" in refused.json()["message"], refused.text

        worker = _start_worker(tmp_path, backend_url, warehouse, "--idle-exit", "2")
        try:
            out, err = worker.communicate(timeout=300)
        finally:
            if worker.poll() is None:
                worker.kill()
        assert worker.returncode == 0, (out[-2000:], err[-2000:])
        assert lineage.lots.counts("slow", "copy") == {Status.READY: 1}
        manifest = lineage.manifests.current("slow", "copies", HALF[0])
        assert manifest is not None and manifest.attempt == 2
        runs = sorted(lineage.runs.list_runs("slow", "copy").items, key=lambda r: r.created_at)
        assert [r.state for r in runs] == [RunState.FAILED, RunState.COMPLETED]  # reaped, then redone
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        lineage.close()


@pytest.mark.parametrize("backend_url", ON_POSTGRESQL, indirect=True)
def test_two_worker_processes_on_postgresql_never_run_a_lot_twice(backend_url: str, tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    with eight_half_hours(backend_url, warehouse) as lineage:
        workers = [
            _start_worker(tmp_path, backend_url, warehouse, "--idle-exit", "5", pipeline="weblogs.py")
            for _ in range(2)
        ]
        outputs = [w.communicate(timeout=600) for w in workers]
        for worker, (_, err) in zip(workers, outputs, strict=True):
            assert worker.returncode == 0, err[-2000:]
        for job, count in (("parse", 8), ("hourly_counts", 4)):
            runs = lineage.runs.list_runs(NS, job).items
            assert len(runs) == count and len({r.lot for r in runs}) == count  # one run per lot
            assert {r.state for r in runs} == {RunState.COMPLETED}
        done = [out.count(": done") for out, _ in outputs]
        assert sum(done) == 12  # every lot done once, by one of the two


def test_the_worker_logs_a_failure_as_its_one_line_reason(capsys: pytest.CaptureFixture[str]) -> None:
    from lotline.cli.worker import _print

    failed = LotResult(
        "parse",
        "20230101PT30M001",
        2,
        uuid.uuid4(),
        ok=False,
        seconds=1.25,
        error="job parse lot 20230101PT30M001 (attempt 2): unparseable line",
        reason="unparseable line",
    )
    _print(failed)
    assert capsys.readouterr().out == "parse 20230101PT30M001 attempt 2: FAILED: unparseable line (1.2 s)\n"


# Where SIGTERM lands is the process group's; a lot finished and recorded on each database is the
# other worker tests'. Once, on SQLite.
@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_a_sigterm_to_the_worker_s_process_group_finishes_the_lot_in_progress(
    lineage: Lineage, tmp_path: Path
) -> None:
    """Issue 39.15: systemd's default ``KillMode=control-group`` sends SIGTERM to every process of
    the worker's group. Spark's JVM (and its Python workers) used to be in that group: it died and
    the lot failed (``Py4JNetworkError``). Now it runs apart: the worker finishes the lot (its Spark
    task still running when the signal came), then stops, exit 0."""
    register(lineage, load_pipeline(str(PIPELINES / "waiting.py")))
    ingest(lineage, "waiting", "raw", "20230101PT1H000", [["a line"]])
    wait = tmp_path / "wait"
    wait.mkdir()
    args = ["worker", str(PIPELINES / "waiting.py"), "--poll", "0.5"]
    worker = start_waiting(
        args, lineage.store.url, tmp_path / "warehouse", wait, tmp_path, LOTLINE_SPARK_CONF=SPARK_CONF
    )
    try:
        wait_until(
            lambda: (wait / "started").exists() or worker.poll() is not None,
            timeout=600,
            what="the lot to start",
        )
        assert worker.poll() is None, worker.communicate()
        os.killpg(worker.pid, signal.SIGTERM)  # the worker's whole group, as systemd does
        (wait / "release").touch()
        out, err = worker.communicate(timeout=600)
    finally:
        (wait / "release").touch()
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 0, (out[-2000:], err[-2000:])
    assert "stopped; 1 lots done, 0 failed" in out, (out, err)
    assert lineage.lots.counts("waiting", "wait") == {Status.READY: 1}
