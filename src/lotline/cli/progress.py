"""``lotline project``'s progress on stderr: the backlog when it starts, then a line a second."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from lotline.services.projection import Drained

#: At most one progress line this often.
EVERY_SECONDS = 1.0


class Progress:
    """Told of each group (``ProjectionService.drain(on_group=…)``); says how far the drain is."""

    def __init__(self, backlog: int, out: TextIO | None = None, every: float = EVERY_SECONDS) -> None:
        self._out = out or sys.stderr
        self._backlog = backlog
        self._every = every
        self._started = self._last = time.monotonic()
        self._applied = self._failed = 0
        if backlog:
            self._say(f"projecting {backlog:,} pending events")

    def group(self, group: Drained) -> None:
        self._applied += len(group.applied)
        self._failed += len(group.failed)
        now = time.monotonic()
        if now - self._last < self._every:
            return
        self._last = now
        done = self._applied + self._failed
        rate = done / (now - self._started)
        left = max(self._backlog - done, 0)
        to_go = f", about {left / rate:,.0f} s to go" if left and rate else ""
        self._say(
            f"{done:,} of {self._backlog:,} projected ({self._failed:,} failed), {rate:,.0f} events/s{to_go}"
        )

    def _say(self, line: str) -> None:
        print(line, file=self._out, flush=True)
