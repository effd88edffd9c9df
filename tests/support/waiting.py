"""The Ctrl-C test's Spark task (``pipelines/waiting.py``): says it started, then waits until a file
appears under ``$LOTLINE_TEST_WAIT``. A module of its own so Spark's Python workers import it (they
cannot import a pipeline file's module; the test puts ``tests/`` on their PYTHONPATH)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def wait_for_release(value: str) -> str:
    folder = Path(os.environ["LOTLINE_TEST_WAIT"])
    (folder / "started").touch()
    while not (folder / "release").exists():
        time.sleep(0.1)
    return value
