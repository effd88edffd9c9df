"""A real Spark cluster: a standalone master and worker from the pyspark package on 127.0.0.1, and
two ``lotline worker`` processes (each a Spark application on it) sharing one PostgreSQL database,
running a pipeline with child work (``parse`` computes each lot in two parts).

One worker is SIGKILLed (with its driver) while it holds a lot; the other reaps the lot once its
lease runs out and computes it again. Checked: the output equals plain PySpark over the same raw
lines, no (job, lot) and no part ever had two runs at once, and nothing of the killed attempt is
visible. Sized to prove, not to soak: twelve lots, a one-core application per worker.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lotline.domain.coordination import Status
from lotline.domain.runs import RunState
from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.databases import ON_POSTGRESQL
from support.jvm_archive import daemon_options
from support.polling import wait_until
from support.spark import PIPELINES, ingest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NS = "cluster"
PIPELINE = PIPELINES / "cluster.py"
HALF_HOURS = [f"20230101PT30M{i:03d}" for i in range(8)]
HOURS = [f"20230101PT1H{i:03d}" for i in range(4)]
#: Two raw files per lot, one line each: ``parse`` runs each lot as two parts (child runs).
LINES = {
    lot: [f"2023-01-01T00:00:00 /{(i + f) % 3} {404 if (i + f) % 4 == 3 else 200}" for f in range(2)]
    for i, lot in enumerate(HALF_HOURS)
}
#: Each application: one core of the worker's two, small executors; REFERENCE.md's test settings.
SPARK_CONF = ",".join(
    [
        "spark.cores.max=1",
        "spark.executor.cores=1",
        "spark.executor.memory=512m",
        "spark.sql.shuffle.partitions=1",
        "spark.default.parallelism=1",
        "spark.ui.enabled=false",
        "spark.driver.extraJavaOptions=-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        # The executors as the master and the worker: the suite's JVM options and archive.
        f"spark.executor.defaultJavaOptions={daemon_options()}",
    ]
)
LEASE_S = 4


def _one_at_a_time(runs: list[Any]) -> list[RunState]:
    """The runs' states in start order, checking that each ended before the next one started (and
    that every run but the last failed)."""
    spans = sorted((r.started_at, r.ended_at, r.state) for r in runs)
    for (_, ended, state), (started, _, _) in itertools.pairwise(spans):
        assert state is RunState.FAILED
        assert ended is not None
        assert ended <= started
    return [state for _, _, state in spans]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture(scope="module")
def spark_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spark://127.0.0.1:<port>``: a standalone master with one two-core worker."""
    import pyspark

    home = Path(pyspark.__file__).parent
    logs = tmp_path_factory.mktemp("spark-cluster")
    port, master_ui, worker_ui = _free_port(), _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    spark_class = str(home / "bin" / "spark-class")
    master = ["org.apache.spark.deploy.master.Master", "--port", str(port), "--webui-port", str(master_ui)]
    worker = ["org.apache.spark.deploy.worker.Worker", url, "--cores", "2", "--memory", "2g"]
    worker += ["--webui-port", str(worker_ui), "--work-dir", str(logs / "work")]
    commands = [[spark_class, *master, "--host", "127.0.0.1"], [spark_class, *worker, "--host", "127.0.0.1"]]
    processes = []
    try:
        for index, command in enumerate(commands):
            log = (logs / f"{index}.log").open("w")
            processes.append(
                subprocess.Popen(
                    command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            )

        def worker_alive() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{master_ui}/json/", timeout=2) as answer:
                    return int(json.load(answer)["aliveworkers"]) >= 1
            except (OSError, ValueError):  # not up yet, or its web UI still answers with a page
                return False

        wait_until(worker_alive, timeout=90, what="the Spark worker to register with the master")
        yield url
    finally:
        for process in reversed(processes):
            os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            process.wait(timeout=30)


def _start_worker(backend_url: str, warehouse: Path, master: str, cwd: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "LOTLINE_DB_URL": backend_url,
        "LOTLINE_WAREHOUSE": str(warehouse),
        "LOTLINE_SPARK_MASTER": master,
        "LOTLINE_SPARK_CONF": SPARK_CONF,
        "PYSPARK_PYTHON": sys.executable,
    }
    command = [sys.executable, "-m", "lotline", "worker", str(PIPELINE)]
    command += ["--lease", str(LEASE_S), "--poll", "0.5"]
    return subprocess.Popen(
        command,
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its Spark driver (a JVM child) dies with it
    )


@pytest.mark.parametrize("backend_url", ON_POSTGRESQL, indirect=True)
@pytest.mark.slow
def test_two_workers_on_a_cluster_survive_a_kill(
    backend_url: str, spark_master: str, tmp_path: Path, spark: SparkSession
) -> None:
    from pyspark.sql import functions as F
    from pyspark.testing import assertDataFrameEqual

    warehouse = tmp_path / "warehouse"
    lineage = Lineage.over(Store(backend_url), Storage(str(warehouse)))
    workers: list[subprocess.Popen[str]] = []
    try:
        register(lineage, load_pipeline(str(PIPELINE)))
        for lot, lines in LINES.items():
            ingest(lineage, NS, "raw_logs", lot, [[line] for line in lines])
        workers = [_start_worker(backend_url, warehouse, spark_master, tmp_path) for _ in range(2)]

        def hanging() -> str | None:
            for row in lineage.lots.status(NS, job="parse"):
                if row.lot == HALF_HOURS[0] and row.status is Status.RUNNING and row.attempt == 1:
                    return row.owner
            return None

        wait_until(lambda: hanging() is not None, timeout=120, what="a worker to take the hanging lot")
        owner = hanging()
        assert owner is not None
        victim = next(w for w in workers if owner.endswith(f":{w.pid}"))
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        survivor = next(w for w in workers if w is not victim)

        def every_lot_ready() -> bool:
            done = [s.status for job in ("parse", "hourly_counts") for s in lineage.lots.status(NS, job=job)]
            return done == [Status.READY] * (len(HALF_HOURS) + len(HOURS))

        wait_until(every_lot_ready, timeout=300, what="the survivor to finish every lot")
        os.killpg(survivor.pid, signal.SIGTERM)  # stopped as systemd stops it: it ends cleanly
        output, _ = survivor.communicate(timeout=300)
        assert survivor.returncode == 0, output[-3000:]

        # Every lot is READY, the hanging one at its second attempt, run by the survivor.
        produced = {s.lot: s for job in ("parse", "hourly_counts") for s in lineage.lots.status(NS, job=job)}
        assert sorted(produced) == sorted(HALF_HOURS + HOURS)
        assert {s.status for s in produced.values()} == {Status.READY}
        assert produced[HALF_HOURS[0]].attempt == 2
        # No (job, lot) and no part ever had two runs at once: each ended before the next started.
        for job, lots in (("parse", HALF_HOURS), ("hourly_counts", HOURS)):
            runs = lineage.runs.list_runs(NS, job, limit=1000).items
            for lot in lots:
                lot_runs = [r for r in runs if r.lot == lot and r.parent_run_id is None]
                assert _one_at_a_time(lot_runs)[-1] is RunState.COMPLETED
                parts: dict[str, list[Any]] = {}
                for child in (r for r in runs if r.lot == lot and r.parent_run_id is not None):
                    parts.setdefault(child.facets["lotline_part"]["part"], []).append(child)
                assert len(parts) == (2 if job == "parse" else 0)
                for part_runs in parts.values():
                    assert _one_at_a_time(part_runs)[-1] is RunState.COMPLETED
        parse_runs = lineage.runs.list_runs(NS, "parse", limit=1000).items
        killed = [r for r in parse_runs if r.lot == HALF_HOURS[0] and r.parent_run_id is None]
        assert sorted(r.state for r in killed) == sorted([RunState.FAILED, RunState.COMPLETED])
        # Nothing of the killed attempt is visible: readers see only attempt 2's objects.
        manifest = lineage.manifests.current(NS, "hits", HALF_HOURS[0])
        assert manifest is not None
        assert manifest.attempt == 2
        # The part that hung is attempt 2's; the other part of the killed attempt, if it finished
        # before the kill, is kept from attempt 1; nothing else of attempt 1 is listed.
        hung = [o for o in manifest.objects if o.partition_values.get("part") == "00000"]
        assert hung
        assert all("/attempt=2/" in o.uri for o in hung)
        assert len({o.partition_values["part"] for o in manifest.objects}) == 2

        # The result equals plain PySpark over the same raw lines.
        uris = []
        for hour in HOURS:
            current = lineage.manifests.current(NS, "hourly_hits", hour)
            assert current is not None
            uris += [o.uri for o in current.objects]
        got = spark.read.parquet(*uris)
        rows = [
            (f"2023-01-01 {i // 2:02d}:00:00", line)
            for i, lot in enumerate(HALF_HOURS)
            for line in LINES[lot]
        ]
        raw = spark.createDataFrame(rows, "hour string, value string")
        parts = F.split("value", " ")
        expected = (
            raw.select(
                parts[1].alias("url"), parts[2].cast("int").alias("status"), F.col("hour").cast("timestamp")
            )
            .where("status < 400")
            .groupBy("url", "hour")
            .agg(F.count("*").alias("hits"))
            .select("url", "hits", "hour")
        )
        assertDataFrameEqual(got, expected)
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=30)
        lineage.close()
