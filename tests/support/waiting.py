"""The Ctrl-C test's Spark task (``pipelines/waiting.py``): says it started, then waits until a file
appears under ``$LOTLINE_TEST_WAIT``. A module of its own so Spark's Python workers import it (they
cannot import a pipeline file's module; the test puts ``tests/`` on their PYTHONPATH)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def wait_for_release(value: str) -> str:
    folder = Path(os.environ["LOTLINE_TEST_WAIT"])
    (folder / "started").touch()
    while not (folder / "release").exists():
        time.sleep(0.1)
    return value


def start_waiting(
    args: list[str], db_url: str, warehouse: Path, wait: Path, cwd: Path, **settings: str
) -> subprocess.Popen[str]:
    """``lotline ARGS`` on this pipeline (``pipelines/waiting.py``, in ARGS), in a process group
    of its own (a test signals the group, as a terminal or systemd does), with the settings it needs
    and ``settings`` (``LOTLINE_*``) besides."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")},
        "LOTLINE_DB_URL": db_url,
        "LOTLINE_WAREHOUSE": str(warehouse),
        "LOTLINE_SPARK_MASTER": "local[1]",
        "LOTLINE_TEST_WAIT": str(wait),
        "PYTHONPATH": str(Path(__file__).parent.parent),  # this module, for Spark's Python workers
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
