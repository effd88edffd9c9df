"""The projector's view of the server's load (``ServerLoad``): a process spinning on a CPU is busy,
a sleeping one is not. Real processes, read from Linux's /proc."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from lotline.server.load import LOAD_SAMPLE_SECONDS, ServerLoad

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc")


def _samples(pid: int, seconds: float) -> list[bool]:
    load = ServerLoad(pid)
    found = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(LOAD_SAMPLE_SECONDS)
        found.append(load.busy())
    return found


@pytest.mark.parametrize(
    ("code", "busy"), [("while True: pass", True), ("import time; time.sleep(60)", False)]
)
def test_a_spinning_process_is_busy_and_a_sleeping_one_is_not(code: str, busy: bool) -> None:
    process = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.5)  # past the interpreter's start
        samples = _samples(process.pid, 3.0)
    finally:
        process.kill()
        process.wait()
    # The spinner need not win the CPU in every window (the machine runs the tests too): in some.
    assert any(samples) if busy else not any(samples)


def test_a_process_that_is_gone_is_not_busy() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    samples = _samples(process.pid, 0.5)
    assert samples and not any(samples)
