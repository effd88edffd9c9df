"""Ctrl-C during ``lotline run``: the lot in progress fails as ``interrupted by the user`` (recorded
so, not as an empty ``KeyboardInterrupt: ``), one line per interrupted lot, the run's summary, exit
code 130, and no traceback (nor Spark's log below ERROR, the default). The whole process group
gets SIGINT, as from a terminal."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from lotline.domain.failures import INTERRUPTED
from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.runner import register
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.spark import PIPELINES, ingest
from support.waiting import start_waiting

LOT = "20230101PT1H000"


def test_ctrl_c_fails_the_lot_in_progress_in_one_line_and_exits_130(backend_url: str, tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    with Lineage.over(Store(backend_url), Storage(str(warehouse))) as lineage:
        register(lineage, load_pipeline(str(PIPELINES / "waiting.py")))
        ingest(lineage, "waiting", "raw", LOT, [["a line"]])
    wait = tmp_path / "wait"
    wait.mkdir()
    process = start_waiting(["run", str(PIPELINES / "waiting.py")], backend_url, warehouse, wait, tmp_path)
    try:
        deadline = time.monotonic() + 600
        while not (wait / "started").exists():  # the lot's Spark task is running
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the lot never started"
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=600)
    finally:
        (wait / "release").touch()
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
    with Lineage.over(Store(backend_url), Storage(str(warehouse))) as lineage:
        [row] = lineage.lots.status("waiting", job="wait")
        assert (row.status.value, row.attempt, row.error) == ("ERROR", 1, INTERRUPTED)
