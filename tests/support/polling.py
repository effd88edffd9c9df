"""Waiting for something another thread or process does: poll with a generous deadline, never
assert on how long it took."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def wait_until(condition: Callable[[], bool], *, timeout: float, what: str, every: float = 0.1) -> None:
    """Return once ``condition()`` holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout} s")
        time.sleep(every)


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's exit is reaped by whoever adopted it, maybe late; ``/proc``:
    the tests run on Linux)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
