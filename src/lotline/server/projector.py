"""The server's projector: a process of its own that drains the journal whenever events arrive.

It is woken by every accepted POST of the server that started it (``wake``: a byte down a
pipe), on PostgreSQL also by ``NOTIFY`` from other processes, and otherwise polls slowly, in
case a wake-up was missed. When another process's projector holds the lock it tells that one
(NOTIFY) and tries again shortly, so events are never left waiting for the slow poll. ``stop``
lets the group in progress commit and leaves the rest of the journal pending for the next start.

Accepting events goes first: the projector runs at the lowest CPU priority, and on Linux it also
stands aside, between groups, while the server that started it is busy, for at most
``MAX_DEFER_SECONDS`` at a time (``ServerLoad``). Reads do not wait for it: each first projects
what was journaled before it.

Why a process and not a thread of the server: projection is many short database round trips,
and after each one a thread must win the GIL back from the request threads; under load a
projector thread got ~13 events/s applied while the same code in its own process gets its full
rate (docs/benchmarks.md).
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection

from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.errors import DatabaseError, DatabaseUnavailable
from lotline.server.load import LOAD_SAMPLE_SECONDS, ServerLoad
from lotline.services.outage import Outage
from lotline.services.projection import ProjectionService
from lotline.store.engine import Store
from lotline.store.queries import events

log = logging.getLogger(__name__)

POLL_SECONDS = 5.0
#: The server's projector yields the CPU to the server (accepting events first, so that producers
#: are never slowed down by projection), and projects with what is left: on Linux it runs under
#: SCHED_IDLE, only on CPU that nothing else wants. In bench/ingest's single-event load it took
#: 0.12 ms of CPU per accepted event against 0.20-0.23 at nice 5 (accepted: 2,543-2,888/s against
#: 2,347-2,592/s), and drained as fast after the load. Reads never wait on it: each first
#: projects, at normal priority, what was journaled before it. It is niced as well (elsewhere
#: than Linux that is all, and it marks the process as the projector).
PROJECTOR_NICENESS = 5
#: Under Linux the projector also stands aside, between groups, while the server that started it is
#: busy (``load.ServerLoad``), for at most this long at a time; then it projects a group, so that a
#: sustained load still projects.
MAX_DEFER_SECONDS = 5.0
BUSY_RETRY_SECONDS = 0.25
ERROR_BACKOFF_SECONDS = 1.0
LISTEN_TIMEOUT_SECONDS = 0.5


class BackgroundProjector:
    """The projector's loop, run by threads of the calling process (see ``ProjectorProcess``)."""

    def __init__(
        self,
        store: Store,
        projection: ProjectionService,
        poll_seconds: float = POLL_SECONDS,
        *,
        wake: threading.Event | None = None,
        stopping: threading.Event | None = None,
        server_busy: Callable[[], bool] | None = None,
        max_defer_seconds: float = MAX_DEFER_SECONDS,
        clock: Clock = SYSTEM_CLOCK,
        outage: Outage | None = None,
    ) -> None:
        """``clock``: how long it has stood aside is measured on its ``monotonic`` (a test passes a
        ``ManualClock`` it advances). ``outage``: says when the database goes and comes back, one
        line each (``lotline serve``'s only lines about an outage; issue 39.16)."""
        self._store = store
        self._server_busy = server_busy or (lambda: False)
        self._max_defer_seconds = max_defer_seconds
        self._clock = clock.monotonic
        self._last_drain = self._clock()
        self._projection = projection
        self._poll_seconds = poll_seconds
        self._wake = wake or threading.Event()
        self._stopping = stopping or threading.Event()
        self._idle = threading.Event()
        self._threads: list[threading.Thread] = []
        self._outage = outage or Outage(log.warning)

    def start(self) -> None:
        self._wake.set()  # whatever is pending from before the start goes first
        self._threads = [threading.Thread(target=self.run, name="lotline-projector", daemon=True)]
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

    def run(self) -> None:
        """The loop, until stopped; also LISTENs where the database notifies (a thread with its own
        connection)."""
        listener = None
        if self._store.capabilities.notifies:
            listener = threading.Thread(target=self._listen, name="lotline-listener", daemon=True)
            listener.start()
        try:
            self._loop()
        finally:
            self._stopping.set()
            if listener is not None:
                listener.join(LISTEN_TIMEOUT_SECONDS * 4)

    def _loop(self) -> None:
        delay = 0.0
        while not self._stopping.is_set():
            if delay:
                self._stopping.wait(delay)
            self._wake.wait(self._poll_seconds)
            self._wake.clear()
            if self._stopping.is_set():
                break
            delay = 0.0
            if self._server_busy() and self._clock() - self._last_drain < self._max_defer_seconds:
                delay = LOAD_SAMPLE_SECONDS  # stand aside, and look again
                self._wake.set()
                continue
            should_stop = functools.partial(self._should_stop, self._clock())
            try:
                drained = self._projection.drain(wait=False, should_stop=should_stop)
            except DatabaseUnavailable as down:  # one line for the whole outage, no stack
                self._outage.failed(down)
                delay = ERROR_BACKOFF_SECONDS
                self._wake.set()
                continue
            except Exception:
                log.exception("the background projector failed; it tries again")
                delay = ERROR_BACKOFF_SECONDS
                self._wake.set()
                continue
            finally:
                self._last_drain = self._clock()
            self._outage.recovered()
            if drained.busy:
                self._notify_holder()
                delay = BUSY_RETRY_SECONDS
                self._wake.set()
            elif drained.stalled:
                delay = ERROR_BACKOFF_SECONDS
                self._wake.set()
            elif not self._stopping.is_set() and not self._wake.is_set():
                self._idle.set()

    def _should_stop(self, started: float) -> bool:
        """For a drain that ``started``: stop when asked to; and, once a group's time has passed,
        when the server is busy (the drain is cut short and comes back once the server has room)."""
        if self._stopping.is_set():
            return True
        if self._clock() - started >= self._projection.group_seconds and self._server_busy():
            self._wake.set()
            return True
        return False

    def _notify_holder(self) -> None:
        """Another process is projecting: make sure it looks again once it is done."""
        try:
            self._projection.wake_others()
        except Exception:
            log.exception("could not notify the other projector")

    def _listen(self) -> None:
        while not self._stopping.is_set():
            try:
                listener = self._store.listen(events.CHANNEL)
            except DatabaseError as error:  # an outage: the loop says so, once
                log.debug("cannot LISTEN for journaled events: %s", error.detail)
                self._stopping.wait(ERROR_BACKOFF_SECONDS * 5)
                continue
            except Exception:
                log.exception("cannot LISTEN for journaled events; polling only for now")
                self._stopping.wait(ERROR_BACKOFF_SECONDS * 5)
                continue
            try:
                while not self._stopping.is_set():
                    if listener.wait(LISTEN_TIMEOUT_SECONDS):
                        self._wake.set()
            except DatabaseError as error:
                log.debug("lost the LISTEN connection: %s", error.detail)
                self._stopping.wait(ERROR_BACKOFF_SECONDS)
            except Exception:
                log.exception("lost the LISTEN connection; reconnecting")
                self._stopping.wait(ERROR_BACKOFF_SECONDS)
            finally:
                listener.close()


#: What the fork server that projector processes are forked from imports once, instead of each
#: projector importing it again (1.2 s of CPU), at its start and at every restart.
PRELOADED = ["lotline.server.projector", "lotline.services"]


class ProjectorProcess:
    """``lotline serve``'s projector: ``BackgroundProjector`` in a process of its own, forked from
    ``multiprocessing``'s fork server (a clean interpreter that imported ``PRELOADED`` once: none of
    the server's threads, connections or state).

    The server signals it through a pipe and never through a lock the two processes share (as
    ``multiprocessing.Event`` does: a projector killed while holding that lock, by the OOM killer
    say, would hang every later wake-up of the server, and with it the journal writer). A wake-up
    is one byte, written without blocking — a full pipe already holds wake-ups enough. Stopping is
    the end of the pipe: :meth:`stop` closes the server's end, and a server that dies closes it
    too, so an orphaned projector stops by itself.
    """

    def __init__(self, db_url: str, poll_seconds: float = POLL_SECONDS) -> None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOADED)  # only until the fork server has started
        # Only the file descriptors of this pipe are used (``os.read``/``os.write``), not its
        # ``send``/``recv``: a Connection is what a forked-from-the-server process can be handed.
        self._projector_end, self._server_end = context.Pipe(duplex=False)
        os.set_blocking(self._server_end.fileno(), False)
        self._process = context.Process(
            target=_run_projector,
            # The server's pid: the projector's parent is the fork server.
            args=(db_url, poll_seconds, self._projector_end, os.getpid()),
            name="lotline-projector",
        )

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def start(self) -> None:
        self._process.start()
        self._projector_end.close()  # the projector has its own copy; EOF needs ours gone

    def is_alive(self) -> bool:
        return self._process.is_alive()

    def wake(self) -> None:
        """Events were journaled (cheap: one byte down a pipe, no database round trip)."""
        try:
            os.write(self._server_end.fileno(), b"w")
        except BlockingIOError:
            pass  # the pipe is full of wake-ups the projector has yet to read
        except OSError:
            pass  # the projector is gone (or stopped): nothing to wake; ``stop`` reports it

    def stop(self, timeout: float = 30.0) -> int | None:
        """The group in progress commits; the rest of the journal stays pending. Returns the
        projector's exit code (0: it stopped as asked)."""
        self._server_end.close()
        self._process.join(timeout)
        if self._process.is_alive():
            log.warning("the projector did not stop within %.0f s; terminating it", timeout)
            self._process.terminate()
            self._process.join(timeout)
        exitcode = self._process.exitcode
        if exitcode:
            log.warning("the projector ended with exit code %s", exitcode)
        self._process.close()
        return exitcode


def _yield_cpu() -> None:
    if hasattr(os, "nice"):
        os.nice(PROJECTOR_NICENESS)
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def _run_projector(db_url: str, poll_seconds: float, signals: Connection, server_pid: int) -> None:
    from lotline.services import open_lineage

    logging.basicConfig(level=logging.INFO)
    _yield_cpu()
    wake, stopping = threading.Event(), threading.Event()
    receiver = threading.Thread(
        target=_receive_signals, args=(signals.fileno(), wake, stopping), name="lotline-signals", daemon=True
    )
    receiver.start()
    outage = Outage(log.warning, stop=stopping)
    while True:  # a projector started (or restarted) during an outage waits it out, never dies of it
        try:
            lineage = open_lineage(db_url)
            break
        except DatabaseUnavailable as down:
            outage.wait(down)
            if stopping.is_set():
                return
    try:
        BackgroundProjector(
            lineage.store,
            lineage.projection,
            poll_seconds,
            wake=wake,
            stopping=stopping,
            server_busy=ServerLoad(server_pid).busy,
            outage=outage,
        ).run()
    finally:
        lineage.close()


def _receive_signals(fd: int, wake: threading.Event, stopping: threading.Event) -> None:
    """Each byte from the server is a wake-up; the end of the pipe (``stop``, or the server gone)
    means stop."""
    while True:
        try:
            received = os.read(fd, 4096)
        except OSError:
            received = b""
        if not received:
            stopping.set()
            wake.set()
            return
        wake.set()


class SupervisedProjector:
    """The server's projector process, started again when it dies (kill -9, out of memory), after
    1 s, then 2, 4 … at most 30 s while it keeps dying. Until it is back, events stay journaled and
    ``alive`` is False (``/healthz`` reports the server degraded)."""

    FIRST_DELAY_S = 1.0
    MAX_DELAY_S = 30.0
    CHECK_EVERY_S = 0.5

    def __init__(self, db_url: str) -> None:
        self._db_url = db_url
        self._current = ProjectorProcess(db_url)
        self.restarts = 0
        self._stopping = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="projector supervisor", daemon=True)

    @property
    def alive(self) -> bool:
        return self._current.is_alive()

    @property
    def pid(self) -> int | None:
        return self._current.pid

    def start(self) -> None:
        self._current.start()
        self._watcher.start()

    def wake(self) -> None:
        self._current.wake()

    def _watch(self) -> None:
        delay = self.FIRST_DELAY_S
        while not self._stopping.wait(self.CHECK_EVERY_S):
            if self._current.is_alive():
                delay = self.FIRST_DELAY_S
                continue
            log.warning("the projector process died; starting it again in %.0f s", delay)
            if self._stopping.wait(delay):
                return
            self._current.stop(timeout=0)
            self._current = ProjectorProcess(self._db_url)
            self._current.start()
            self.restarts += 1
            delay = min(self.MAX_DELAY_S, delay * 2)

    def stop(self, timeout: float = 30.0) -> int | None:
        self._stopping.set()
        if self._watcher.is_alive():
            self._watcher.join()
        return self._current.stop(timeout)
