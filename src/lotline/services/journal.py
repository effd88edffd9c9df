"""Group commit of the OpenLineage journal: one writer per server process.

Each ``POST /lineage`` (and ``/lineage/batch``) validates its events, hands them to the writer
and waits. The writer's thread takes everything waiting, journals it in one multi-row statement
and one transaction (``openlineage.journal``), and only then answers each request: concurrent
requests share one round trip and one commit (on SQLite, one turn of its single write lock), and
no request is answered before its events are durable. Requests do no database I/O themselves.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from lotline.services.openlineage import Journaled, journal
from lotline.store.engine import Store
from lotline.store.queries.events import JournalEntry

log = logging.getLogger(__name__)

#: Most events journaled in one statement (SQLAlchemy sends up to 1,000 rows per statement).
MAX_GROUP = 1000


class JournalUnavailable(Exception):
    """The database failed while journaling (an outage, not the events' fault): retry later."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class _Waiting:
    entries: Sequence[JournalEntry]
    answer: Future[list[Journaled]]


class JournalWriter:
    """Journals what concurrent requests submit, in groups, from one thread of its own.

    ``on_new`` is called once per group that journaled something new (to wake the projector).
    """

    def __init__(self, store: Store, on_new: Callable[[], None] | None = None) -> None:
        self._store = store
        self._on_new = on_new
        self._queue: queue.SimpleQueue[_Waiting | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._open = False
        self._thread = threading.Thread(target=self._run, name="lotline-journal", daemon=True)

    def start(self) -> None:
        with self._lock:
            self._open = True
        self._thread.start()

    def submit(self, entries: Sequence[JournalEntry]) -> Future[list[Journaled]]:
        """What became of each entry (new, repeat, refused), once committed; fails with
        ``JournalUnavailable`` if the database failed or the writer is stopped."""
        waiting = _Waiting(entries, Future())
        with self._lock:
            if not self._open:
                waiting.answer.set_exception(JournalUnavailable("the server is shutting down; retry."))
                return waiting.answer
            self._queue.put(waiting)
        return waiting.answer

    def stop(self) -> None:
        """Journal everything submitted so far, then end the thread."""
        with self._lock:
            if not self._open:
                return
            self._open = False
            self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                return
            group, size = [first], len(first.entries)
            while size < MAX_GROUP:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                    break
                group.append(more)
                size += len(more.entries)
            self._write(group)

    def _write(self, group: list[_Waiting]) -> None:
        entries = [entry for waiting in group for entry in waiting.entries]
        try:
            results = journal(self._store, entries)
        except SQLAlchemyError as error:
            log.warning("journaling %d events failed: %s", len(entries), error)
            failure = JournalUnavailable(f"the database failed while journaling; retry: {_first_line(error)}")
            for waiting in group:
                waiting.answer.set_exception(failure)
            return
        except Exception as error:  # never leave a request waiting, whatever happened
            log.exception("journaling %d events failed", len(entries))
            for waiting in group:
                waiting.answer.set_exception(error)
            return
        start = 0
        for waiting in group:
            end = start + len(waiting.entries)
            waiting.answer.set_result(results[start:end])
            start = end
        if self._on_new is not None and any(result is True for result in results):
            self._on_new()


def _first_line(error: SQLAlchemyError) -> str:
    orig = getattr(error, "orig", None)
    return (str(orig) if orig is not None else str(error)).splitlines()[0][:200]
