"""Two ``lotline run`` processes, each with its own Spark, on one PostgreSQL database: they coordinate
through the database only, and every lot is done exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lotline.domain.runs import RunState
from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.databases import ON_POSTGRESQL
from support.spark import PIPELINES, ingest

pytestmark = pytest.mark.slow  # Spark in processes of their own

#: REFERENCE.md "Spark in tests", for the processes' own sessions.
SPARK_CONF = ",".join(
    [
        "spark.sql.shuffle.partitions=1",
        "spark.default.parallelism=1",
        "spark.ui.enabled=false",
        "spark.driver.extraJavaOptions=-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    ]
)


#: Eight half-hour lots of raw logs, one line each.
HALF_HOURS = [f"20230101PT30M{i:03d}" for i in range(8)]


def eight_half_hours(backend_url: str, warehouse: Path) -> Lineage:
    """A database with the test weblogs pipeline registered and eight raw lots published."""
    lineage = Lineage.over(Store(backend_url), Storage(str(warehouse)))
    register(lineage, load_pipeline(str(PIPELINES / "weblogs.py")))
    for index, lot in enumerate(HALF_HOURS):
        ingest(lineage, "weblogs", "raw_logs", lot, [[f"2023-01-01T00:00:00 /{index} 200"]])
    return lineage


@pytest.mark.parametrize("backend_url", ON_POSTGRESQL, indirect=True)
def test_two_processes_share_the_lots(backend_url: str, tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    lineage = eight_half_hours(backend_url, warehouse)
    half_hours = HALF_HOURS
    try:
        env = {
            **os.environ,
            "LOTLINE_DB_URL": backend_url,
            "LOTLINE_WAREHOUSE": str(warehouse),
            "LOTLINE_SPARK_MASTER": "local[1]",
            "LOTLINE_SPARK_CONF": SPARK_CONF,
        }
        command = [sys.executable, "-m", "lotline", "run", str(PIPELINES / "weblogs.py"), "--json"]
        processes = [
            subprocess.Popen(
                command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        outputs = [p.communicate(timeout=600) for p in processes]
        for process, (_, stderr) in zip(processes, outputs, strict=True):
            assert process.returncode == 0, stderr[-2000:]
        done: Counter[str] = Counter()
        for stdout, _ in outputs:
            for job in json.loads(stdout)["jobs"]:
                done[job["job"]] += job["done"]
        assert done == {"parse": 8, "hourly_counts": 4}
        for job, lots in (
            ("parse", half_hours),
            ("hourly_counts", [f"20230101PT1H{i:03d}" for i in range(4)]),
        ):
            runs = lineage.runs.list_runs("weblogs", job).items
            assert sorted(r.lot for r in runs) == lots  # one run per lot: none was done twice
            assert {r.state for r in runs} == {RunState.COMPLETED}
    finally:
        lineage.close()
