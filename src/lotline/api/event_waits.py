"""Long polls of the lot events (``GET /lots/events?wait=``) without a thread each.

A waiting request used to sleep in the thread pool, which all of FastAPI's plain routes share
(40 threads): 45 waiters stalled the rest of the API until they timed out. Now a waiter is a
coroutine: it awaits ``LotEventWatch.moved``, which one task per server process sets when the
log's last position moves (one short query every ``POLL_S`` in the thread pool, only while
someone waits, however many wait). Positions are committed in order (``store/queries/
lot_events.py``), so the last position moves whenever any event becomes visible. Waiters beyond
``cap`` are refused (429): each holds a connection and a coroutine, not a thread, but not for free.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress

from starlette.concurrency import run_in_threadpool

from lotline.domain.errors import TooManyRequests

log = logging.getLogger(__name__)

#: How often the watch looks at the log's last position while someone waits.
POLL_S = 0.25


class LotEventWatch:
    """The server process's waiters on the lot event log, and the task that wakes them."""

    def __init__(self, last_position: Callable[[], int], cap: int, poll_s: float = POLL_S) -> None:
        self.cap = cap
        self._last_position = last_position
        self._poll_s = poll_s
        self._waiters = 0
        self._moved = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watching: asyncio.Future[None] | None = None

    @property
    def waiters(self) -> int:
        return self._waiters

    @asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        """A waiter's place, while the watch runs; ``TooManyRequests`` beyond the cap. The watch
        has read the last position before this enters: whatever the waiter reads next and
        does not find, the watch sees arrive."""
        if self._waiters >= self.cap:
            raise TooManyRequests(
                f"{self._waiters} requests already wait for lot events on this server (the most "
                f"LOTLINE_MAX_EVENT_WAITERS allows); ask again without wait, or later."
            )
        self._waiters += 1
        try:
            if self._task is None or self._task.done():
                self._watching = asyncio.get_running_loop().create_future()
                self._task = asyncio.create_task(self._watch(self._watching))
            if self._watching is not None:
                await asyncio.shield(self._watching)
            yield
        finally:
            self._waiters -= 1

    def moved(self) -> asyncio.Event:
        """Set at the next move of the last position: take it before reading the log, then wait."""
        return self._moved

    async def _watch(self, watching: asyncio.Future[None]) -> None:
        try:
            last = await run_in_threadpool(self._last_position)
        except Exception as error:  # the database is down: the waiters of now get its error
            watching.set_exception(error)
            return
        watching.set_result(None)
        failing = False
        while self._waiters:
            await asyncio.sleep(self._poll_s)
            try:
                now = await run_in_threadpool(self._last_position)
            except Exception as error:  # waiters still read the log themselves at their deadline
                if not failing:
                    log.warning("lot events watch: %s", getattr(error, "message", error))
                failing = True
                continue
            failing = False
            if now != last:
                last = now
                moved, self._moved = self._moved, asyncio.Event()
                moved.set()


async def wait_for_move(moved: asyncio.Event, seconds: float) -> None:
    """Until ``moved`` is set or ``seconds`` have passed."""
    with suppress(TimeoutError):
        await asyncio.wait_for(moved.wait(), seconds)
