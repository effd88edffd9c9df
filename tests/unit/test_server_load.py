"""The projector's view of the server's load (``ServerLoad``): a process spinning on a CPU is busy,
a sleeping one is not. Real processes, read from Linux's /proc.

No assertion depends on a process getting the CPU within a time window (a loaded machine may give
it none): the windows' time is a ``ManualClock``'s, advanced by the test, and the spinner is
sampled only once /proc says it has used the CPU time that the window needs."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from lotline.domain.clock import ManualClock
from lotline.server.load import LOAD_SAMPLE_SECONDS, SERVER_BUSY_SHARE, ServerLoad, process_cpu_seconds
from support.polling import wait_until

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc")
#: How long the test waits for a process to do what it must (never what it asserts on).
DEADLINE_S = 120.0


def _cpu_seconds(pid: int) -> float:
    found = process_cpu_seconds(pid)
    assert found is not None, f"process {pid} is gone"
    return found


def _started(code: str) -> subprocess.Popen[str]:
    """A Python process running ``code`` after it has said it started (its start-up is done)."""
    process = subprocess.Popen(
        [sys.executable, "-c", f"print('ready', flush=True)\n{code}"], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


def test_a_process_that_used_the_cpu_over_the_window_is_busy() -> None:
    process = _started("while True: pass")
    clock = ManualClock()
    try:
        load = ServerLoad(process.pid, clock.monotonic)
        window = LOAD_SAMPLE_SECONDS
        needed = _cpu_seconds(process.pid) + window * SERVER_BUSY_SHARE
        wait_until(  # however long the machine takes to give it that
            lambda: _cpu_seconds(process.pid) >= needed,
            timeout=DEADLINE_S,
            what="the spinner to get its CPU",
            every=0.05,
        )
        clock.advance(timedelta(seconds=window))
        assert load.busy()
    finally:
        process.kill()
        process.wait()


def test_a_sleeping_process_is_not_busy() -> None:
    process = _started("import time; time.sleep(600)")
    clock = ManualClock()
    try:
        load = ServerLoad(process.pid, clock.monotonic)
        for _ in range(3):
            clock.advance(timedelta(seconds=LOAD_SAMPLE_SECONDS))
            assert not load.busy()
    finally:
        process.kill()
        process.wait()


def test_a_process_that_is_gone_is_not_busy() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    clock = ManualClock()
    load = ServerLoad(process.pid, clock.monotonic)
    clock.advance(timedelta(seconds=LOAD_SAMPLE_SECONDS))
    assert not load.busy()
