"""The server's background projector: a thread that drains the journal whenever events arrive.

It is woken by every accepted POST of its own process (``wake``), on PostgreSQL also by
``NOTIFY`` from other processes, and otherwise polls slowly, in case a wake-up was missed. When
another process's projector holds the lock it tells that one (NOTIFY) and tries again shortly,
so events are never left waiting for the slow poll. ``stop`` lets the group in progress
commit and leaves the rest of the journal pending for the next start.
"""

from __future__ import annotations

import logging
import threading

from lotline.services.projection import ProjectionService
from lotline.store.engine import Store
from lotline.store.queries import events

log = logging.getLogger(__name__)

POLL_SECONDS = 5.0
BUSY_RETRY_SECONDS = 0.25
ERROR_BACKOFF_SECONDS = 1.0
LISTEN_TIMEOUT_SECONDS = 0.5


class BackgroundProjector:
    def __init__(
        self, store: Store, projection: ProjectionService, poll_seconds: float = POLL_SECONDS
    ) -> None:
        self._store = store
        self._projection = projection
        self._poll_seconds = poll_seconds
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._idle = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._wake.set()  # whatever is pending from before the start goes first
        self._threads = [threading.Thread(target=self._run, name="lotline-projector", daemon=True)]
        if self._store.backend == "postgresql":
            self._threads.append(threading.Thread(target=self._listen, name="lotline-listener", daemon=True))
        for thread in self._threads:
            thread.start()

    def wake(self) -> None:
        self._idle.clear()
        self._wake.set()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until a drain has found nothing left to project (False if ``timeout`` passed first)."""
        return self._idle.wait(timeout)

    def request_stop(self) -> None:
        """Stop after the group in progress, without waiting for it (see :meth:`stop`)."""
        self._stopping.set()
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> None:
        self.request_stop()
        for thread in self._threads:
            thread.join(timeout)

    def _run(self) -> None:
        delay = 0.0
        while not self._stopping.is_set():
            if delay:
                self._stopping.wait(delay)
            self._wake.wait(self._poll_seconds)
            self._wake.clear()
            if self._stopping.is_set():
                break
            delay = 0.0
            try:
                drained = self._projection.drain(wait=False, should_stop=self._stopping.is_set)
            except Exception:
                log.exception("the background projector failed; it tries again")
                delay = ERROR_BACKOFF_SECONDS
                self._wake.set()
                continue
            if drained.busy:
                self._notify_holder()
                delay = BUSY_RETRY_SECONDS
                self._wake.set()
            elif drained.stalled:
                delay = ERROR_BACKOFF_SECONDS
                self._wake.set()
            elif not self._stopping.is_set() and not self._wake.is_set():
                self._idle.set()

    def _notify_holder(self) -> None:
        """Another process is projecting: make sure it looks again once it is done."""
        try:
            self._projection.wake_others()
        except Exception:
            log.exception("could not notify the other projector")

    def _listen(self) -> None:
        while not self._stopping.is_set():
            try:
                listener = events.listen(self._store.engine)
            except Exception:
                log.exception("cannot LISTEN for journaled events; polling only for now")
                self._stopping.wait(ERROR_BACKOFF_SECONDS * 5)
                continue
            try:
                while not self._stopping.is_set():
                    if listener.wait(LISTEN_TIMEOUT_SECONDS):
                        self._wake.set()
            except Exception:
                log.exception("lost the LISTEN connection; reconnecting")
                self._stopping.wait(ERROR_BACKOFF_SECONDS)
            finally:
                listener.close()
