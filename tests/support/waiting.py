"""The Ctrl-C scenario (``spark/pipelines/waiting.py``: a lot whose Spark task waits for a file),
written once and run on both modes: on ``local[1]`` by ``spark/test_interrupt.py`` and on Spark
Connect by ``spark/test_connect.py``. ``start_waiting`` also serves ``spark/test_worker.py``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from lotline.domain.failures import INTERRUPTED
from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.polling import running, wait_until
from support.processes import lotline
from support.spark import PIPELINES, ingest

LOT = "20230101PT1H000"
WAITING = PIPELINES / "waiting.py"


def start_waiting(
    args: list[str], db_url: str, warehouse: Path, wait: Path, cwd: Path, **settings: str
) -> subprocess.Popen[str]:
    """``lotline ARGS`` on the waiting pipeline (in ARGS), in a process group of its own (a test
    signals the group, as a terminal or systemd does), with the settings it needs and ``settings``
    (``LOTLINE_*``) besides."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")},
        "LOTLINE_DB_URL": db_url,
        "LOTLINE_WAREHOUSE": str(warehouse),
        "LOTLINE_SPARK_MASTER": "local[1]",
        "LOTLINE_TEST_WAIT": str(wait),
        **settings,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "lotline", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def interrupted_and_redone(backend_url: str, folder: Path, master: str) -> None:
    """SIGINT to the process group of ``lotline run`` on ``master`` while its lot's task waits: one
    line, exit 130, no traceback nor Spark's log below ERROR; the lot failed as ``interrupted by the
    user``, nothing published. The task itself stops (its Python worker is gone, on a Connect server
    too) and writes nothing later into the attempt folder; the next run redoes the lot (attempt 2)."""
    warehouse = folder / "warehouse"
    with Lineage.over(Store(backend_url), Storage(str(warehouse))) as lineage:
        register(lineage, load_pipeline(str(WAITING)))
        ingest(lineage, "waiting", "raw", LOT, [["a line"]])
    wait = folder / "wait"
    wait.mkdir()
    started = wait / "started"
    settings = {"LOTLINE_SPARK_MASTER": master}
    process = start_waiting(["run", str(WAITING)], backend_url, warehouse, wait, folder, **settings)
    try:  # the lot's Spark task is running: its Python worker wrote its pid
        wait_until(
            lambda: process.poll() is not None or (started.exists() and started.read_text() != ""),
            timeout=600,
            what="the lot's task to start",
        )
        assert process.poll() is None, process.communicate()
        worker = int(started.read_text())
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, (out, err)
    assert f"left failed: job wait lot {LOT} (attempt 1): {INTERRUPTED}" in out, (out, err)
    assert out.count(INTERRUPTED) == 1
    # Nor Spark's own log below ERROR (docs/pipelines.md "Spark's log"): no banner, no WARN lines.
    for noise in (
        "Traceback",
        "py4j",
        "Py4J",
        "KeyboardInterrupt",
        "log4j profile",
        "Setting default",
        " WARN ",
    ):
        assert noise not in out + err, (out, err)
    # The task stopped with its client: on Connect, the server cancelled the session's operation
    # (``interruptAll``) and Spark killed the UDF's Python worker; it would otherwise wait forever.
    wait_until(lambda: not running(worker), timeout=120, what=f"the task's Python worker {worker} to end")
    (wait / "release").touch()  # a task still waiting would now go on and write
    with Lineage.over(Store(backend_url), Storage(str(warehouse))) as lineage:
        [row] = lineage.lots.status("waiting", job="wait")
        assert (row.status.value, row.attempt, row.error) == ("ERROR", 1, INTERRUPTED)
        assert lineage.manifests.readable("waiting", "waited", [LOT]) == {}
        again = lotline(
            "run",
            str(WAITING),
            cwd=folder,
            db_url=backend_url,
            settings={**settings, "LOTLINE_WAREHOUSE": str(warehouse), "LOTLINE_TEST_WAIT": str(wait)},
            timeout=600,
            process=True,
        )
        assert again.returncode == 0, again.stderr[-2000:]
        manifest = lineage.manifests.readable("waiting", "waited", [LOT])[LOT]
        assert manifest.attempt == 2 and manifest.row_count == 1
        storage = lineage.storage  # the interrupted attempt wrote nothing, then or later
        assert list(storage.objects_under(storage.attempt_uri("waiting", "waited", LOT, 1))) == []
