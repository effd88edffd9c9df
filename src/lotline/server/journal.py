"""Group commit of the OpenLineage journal: one writer per server process.

Each ``POST /lineage`` (and ``/lineage/batch``) validates its events and awaits
``JournalWriter.journal``. While one group is being written, the events that arrive wait; as
soon as it is committed they are written together, as the next group: one multi-row statement
(``openlineage.journal``), one commit (on SQLite, one turn of its single write lock) for all of
them, instead of one each. A request is answered only after its group has committed. It lives in
the server's event loop, which never blocks on the database: on PostgreSQL the group's statement
(``events.append_statement``) goes out on the store's event-loop connections (asyncpg; a thread
cost the server two thirds of its rate, docs/benchmarks.md "bench.ingest"); on SQLite, and when the
database refused a value of the group (then each event is journaled alone, so that only that one
is refused), ``openlineage.journal`` runs on a thread of the writer's own.

One group is written at a time. With 8 clients posting single events, letting a second group
go while the first waited for its commit made groups of 2.3 events on average instead of 4.0, and
a statement cost the server ~0.15 ms (psycopg's asyncio driver, then) and PostgreSQL ~0.1 ms
whatever its size: 3,590-3,800 events/s against 3,940-4,220/s with one at a time (three runs
each, projector stopped). Measured again on a faster machine, still worse: 6,479-6,998 against
6,488-7,910 events/s (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from lotline.domain.errors import DatabaseError, DatabaseUnavailable, Unavailable, ValueRefused
from lotline.services.openlineage import Journaled, journal, journal_one_by_one, outcomes
from lotline.store.engine import Store
from lotline.store.queries import events
from lotline.store.queries.events import JournalEntry
from lotline.store.types import utcnow

log = logging.getLogger(__name__)


class JournalUnavailable(Unavailable):
    """The database failed while journaling (an outage, not the events' fault), or the server is
    stopping: retry later."""


@dataclass(frozen=True)
class _Waiting:
    entries: Sequence[JournalEntry]
    answer: asyncio.Future[list[Journaled]]


class JournalWriter:
    """Journals what concurrent requests hand it, in groups of up to ``events.MAX_ROWS`` events
    (one statement). Used from one event loop; ``on_new`` is called once per group that
    journaled something new (to wake the projector)."""

    def __init__(self, store: Store, on_new: Callable[[], None] | None = None) -> None:
        self._store = store
        self._on_new = on_new
        self._connections = store.event_loop_connections()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lotline-journal")
        self._waiting: list[_Waiting] = []
        self._writing: asyncio.Task[None] | None = None
        self._open = True

    async def journal(self, entries: Sequence[JournalEntry]) -> list[Journaled]:
        """What became of each entry (new, repeat, refused by the database), once committed;
        raises ``JournalUnavailable`` if the database failed or the writer is stopped."""
        if not self._open:
            raise JournalUnavailable("the server is shutting down; retry.")
        answer: asyncio.Future[list[Journaled]] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(entries, answer))
        if self._writing is None:
            self._writing = asyncio.create_task(self._write_all())
        return await answer

    async def stop(self) -> None:
        """Journal and answer everything handed in so far, then close the connections and thread."""
        self._open = False
        if self._writing is not None:
            await self._writing
        if self._connections is not None:
            await self._connections.close()
        self._thread.shutdown()

    async def _write_all(self) -> None:
        try:
            while self._waiting:
                await self._write(self._next_group())
        finally:
            self._writing = None

    def _next_group(self) -> list[_Waiting]:
        group, size = [self._waiting[0]], len(self._waiting[0].entries)
        for waiting in self._waiting[1:]:
            if size + len(waiting.entries) > events.MAX_ROWS:
                break
            group.append(waiting)
            size += len(waiting.entries)
        del self._waiting[: len(group)]
        return group

    async def _write(self, group: list[_Waiting]) -> None:
        entries = [entry for waiting in group for entry in waiting.entries]
        try:
            results = await self._journal(entries)
        except DatabaseError as error:
            # An outage is said once, by the projector (issue 39.16); every other failure here.
            say = log.debug if isinstance(error, DatabaseUnavailable) else log.warning
            say("journaling %d events failed: %s", len(entries), error.detail)
            failure = JournalUnavailable(f"the database failed while journaling; retry: {error.detail}")
            _fail(group, failure)
            return
        except Exception as error:  # never leave a request waiting, whatever happened
            log.exception("journaling %d events failed", len(entries))
            _fail(group, error)
            return
        start = 0
        for waiting in group:
            end = start + len(waiting.entries)
            if not waiting.answer.done():  # a request cancelled meanwhile needs no answer
                waiting.answer.set_result(results[start:end])
            start = end
        if self._on_new is not None and any(result is True for result in results):
            self._on_new()

    async def _journal(self, entries: list[JournalEntry]) -> list[Journaled]:
        loop = asyncio.get_running_loop()
        if self._connections is None:
            return await loop.run_in_executor(self._thread, journal, self._store, entries)
        statement, parameters = events.append_statement(self._connections.dialect, entries, utcnow())
        try:
            new = set(await self._connections.fetch_column(statement, parameters))
        except ValueRefused:
            return await loop.run_in_executor(self._thread, journal_one_by_one, self._store, entries)
        return outcomes(entries, new)


def _fail(group: list[_Waiting], error: Exception) -> None:
    for waiting in group:
        if not waiting.answer.done():
            waiting.answer.set_exception(error)
