"""How busy the server process is, as the projector sees it: it stands aside while the server works.

Under Linux the projector stands aside, between groups, while the server process that started it
used ``SERVER_BUSY_SHARE`` of a CPU or more over the last ``LOAD_SAMPLE_SECONDS``: even at
SCHED_IDLE, projecting alongside a busy server took 20-25% of its acceptance rate in bench/ingest
while projecting about 2% of what arrived (docs/benchmarks.md). Half a CPU, not more: the server
waits on each journal group's commit, so on a fast machine it accepts at full speed using ~0.7 of a
CPU, and a projector that kept running there still cost it ~8% (A/B, 0.75 vs 0.5).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

SERVER_BUSY_SHARE = 0.5
LOAD_SAMPLE_SECONDS = 0.2


class ServerLoad:
    """Whether the server process that started the projector is busy (Linux: its CPU time in
    ``/proc``, sampled at most every ``LOAD_SAMPLE_SECONDS``; elsewhere never)."""

    def __init__(self, pid: int, monotonic: Callable[[], float] = time.monotonic) -> None:
        """``monotonic``: where the windows' time comes from (tests pass a ``ManualClock``'s)."""
        self._pid = pid
        self._monotonic = monotonic
        self._sampled = (monotonic(), process_cpu_seconds(pid))
        self._busy = False

    def busy(self) -> bool:
        now = self._monotonic()
        then, cpu_then = self._sampled
        if now - then >= LOAD_SAMPLE_SECONDS:
            cpu = process_cpu_seconds(self._pid)
            self._busy = (
                cpu is not None
                and cpu_then is not None
                and cpu - cpu_then >= (now - then) * SERVER_BUSY_SHARE
            )
            self._sampled = (now, cpu)
        return self._busy


def process_cpu_seconds(pid: int) -> float | None:
    """The CPU time a process has used (user and system), from Linux's ``/proc``; None elsewhere,
    or when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
