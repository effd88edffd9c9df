"""Waiting out a database outage (a PostgreSQL restart or failover) in the long-running loops:
``lotline worker``, ``lotline events --follow``, ``lotline webhooks``, ``lotline serve``'s
projector (docs/deploy.md).

A loop that meets ``DatabaseUnavailable`` calls :meth:`Outage.wait`, then starts its step again
(reopening its ``LISTEN``); it calls :meth:`Outage.recovered` after a step that reached the
database. One line says the database went away, one that it is back; in between the loop waits
0.5 s, doubling up to 10 s, so that a long outage costs a connection attempt every 10 s.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from lotline.domain.errors import DatabaseUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")
FIRST_WAIT_S = 0.5
MAX_WAIT_S = 10.0


class Outage:
    """The state of one loop's connection to the database: up, or down since a failure."""

    def __init__(
        self,
        say: Callable[[str], None] = log.warning,
        *,
        first: float = FIRST_WAIT_S,
        cap: float = MAX_WAIT_S,
        stop: threading.Event | None = None,
    ) -> None:
        """``say``: where the two lines go; ``stop``: set to end a wait early (the loop is stopping)."""
        self._say = say
        self._first = first
        self._cap = cap
        self._stop = stop or threading.Event()
        self._next = first
        self.down = False

    def failed(self, error: DatabaseUnavailable) -> None:
        """Note the failure: one line, the first time (for a loop that waits in its own way)."""
        if not self.down:
            self.down = True
            self._say(f"database unavailable ({error.detail or error.message}); retrying")

    def wait(self, error: DatabaseUnavailable) -> None:
        """Note the failure (one line, the first time) and wait before the loop tries again."""
        self.failed(error)
        self._stop.wait(self._next)
        self._next = min(self._cap, 2 * self._next)

    def recovered(self) -> None:
        """The database answered: one line if it had gone away, and the next outage waits from 0.5 s."""
        if self.down:
            self.down = False
            self._say("database available again; resuming")
        self._next = self._first


def retried(action: Callable[[], T], outage: Outage, tries: int) -> T:
    """``action``, one transaction, until it commits, at most ``tries`` times: a transaction the
    database gave up on (an outage, a deadlock's victim) changed nothing, so it is tried again
    after the outage's wait; the last ``DatabaseUnavailable`` is raised."""
    for attempt in range(1, tries + 1):
        try:
            result = action()
        except DatabaseUnavailable as down:
            if attempt == tries:
                raise
            outage.wait(down)
        else:
            outage.recovered()
            return result
    raise ValueError(f"tries must be at least 1, got {tries}")
