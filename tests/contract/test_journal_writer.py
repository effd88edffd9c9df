"""Group commit of the journal (``server/journal.py``), on both databases: requests that wait
together are journaled together, each gets its own answer (new, repeat, or refused by the
database), a failed database fails the waiting requests instead of leaving them waiting, and
``stop`` answers everything handed in before it."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from dataclasses import astuple
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from lotline.domain.errors import InvalidInput
from lotline.domain.openlineage import canonical_json
from lotline.server.journal import JournalUnavailable, JournalWriter
from lotline.services.openlineage import Journaled, journal_entry
from lotline.store import drivers
from lotline.store.engine import Store
from lotline.store.queries import events
from lotline.store.queries.events import JournalEntry
from lotline.store.schema import lineage_events
from support.ol import run_event

NS = "group-commit"


def _entry(job: str, **facets: Any) -> JournalEntry:
    return journal_entry(run_event(NS, job, str(uuid.uuid4()), "START", facets=facets or None))


def _journal_together(writer: JournalWriter, groups: list[list[JournalEntry]]) -> list[Any]:
    """Hand every group to the writer at once, as concurrent requests do, wait for all, stop it:
    each group's answers, or the exception it got."""

    async def together() -> list[Any]:
        answers = await asyncio.gather(*(writer.journal(g) for g in groups), return_exceptions=True)
        await writer.stop()
        return list(answers)

    return asyncio.run(together())


def _journaled_keys(store: Store) -> list[str]:
    with store.read() as connection:
        return [event.payload["job"]["name"] for event in events.pending(connection, 10_000)]


def test_requests_waiting_together_are_journaled_in_one_group_each_with_its_own_answer(
    backend_url: str,
) -> None:
    store = Store(backend_url)
    first, second, third = _entry("first"), _entry("second"), _entry("third")
    groups_written: list[int] = []
    writer = JournalWriter(store, on_new=lambda: groups_written.append(1))
    # A repeat inside the group, and a batch-sized request among single ones.
    answers = _journal_together(writer, [[first], [second, third], [first], [second]])
    assert answers == [[True], [True, True], [False], [False]]
    assert groups_written == [1]  # one group: one wake-up of the projector
    assert _journaled_keys(store) == ["first", "second", "third"]  # each once, in the order received
    # Answers come after the commit, so a repeat of a committed event is a repeat.
    assert _journal_together(JournalWriter(store), [[first]]) == [[False]]
    store.dispose()


def test_on_postgresql_a_group_goes_out_on_the_event_loop_connections_not_the_thread(
    backend_url: str,
) -> None:
    """The writer's thread, which costs each group a GIL hand-over (docs/benchmarks.md
    "bench.ingest"), is for SQLite and for groups with a refused value only: on PostgreSQL an
    ordinary group never starts it."""
    store = Store(backend_url)
    writer = JournalWriter(store)
    assert _journal_together(writer, [[_entry("one")], [_entry("two")]]) == [[True], [True]]
    thread_started = bool(writer._thread._threads)
    assert thread_started is backend_url.startswith("sqlite")
    store.dispose()


def test_a_value_the_database_refuses_fails_only_its_own_request(backend_url: str) -> None:
    store = Store(backend_url)
    good, bad, other = _entry("good"), _entry("bad", note={"text": "a\x00b"}), _entry("other")
    answers = _journal_together(JournalWriter(store), [[good], [bad], [other, good]])
    assert answers[0] == [True]
    assert answers[2] == [True, False]
    (refused,) = answers[1]  # a NUL character: PostgreSQL's jsonb refuses it, and so does SQLite
    assert isinstance(refused, InvalidInput) and "rejected by the database" in refused.message
    assert _journaled_keys(store) == ["good", "other"]
    store.dispose()


def test_nan_is_refused_by_postgresql_never_stored_as_null(backend_url: str) -> None:
    """JSON has no NaN; Python's reader accepts it, so it reaches the journal. PostgreSQL's jsonb
    refuses it (the row document embeds the event's text as is), SQLite stores it as it came."""
    store = Store(backend_url)
    (answer,) = _journal_together(JournalWriter(store), [[_entry("nan", note={"x": float("nan")})]])
    if backend_url.startswith("postgresql"):
        (refused,) = answer
        assert isinstance(refused, InvalidInput) and "rejected by the database" in refused.message
        assert _journaled_keys(store) == []
    else:
        assert answer == [True]
        with store.read() as connection:
            (event,) = events.pending(connection, 10)
        assert math.isnan(event.payload["run"]["facets"]["note"]["x"])
    store.dispose()


def _break(backend_url: str, store: Store) -> None:
    """Take the database away under a store that has already used it: SQLite's file is no
    longer a database; PostgreSQL's database stops accepting connections."""
    store.dispose()
    url = sa.make_url(backend_url)
    if url.get_backend_name() == "sqlite":
        assert url.database is not None
        Path(url.database).write_bytes(b"this is not a database" * 512)
    else:
        _allow_connections(url, allow=False)


def _allow_connections(url: sa.URL, *, allow: bool) -> None:
    admin = sa.create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'ALTER DATABASE "{url.database}" ALLOW_CONNECTIONS {str(allow).lower()}')
        if not allow:
            connection.execute(
                sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :name"),
                {"name": url.database},
            )
    admin.dispose()


def test_a_failing_database_fails_the_waiting_requests_with_a_clear_error(backend_url: str) -> None:
    store = Store(backend_url)
    assert _journal_together(JournalWriter(store), [[_entry("before")]]) == [[True]]
    _break(backend_url, store)
    try:
        answers = _journal_together(JournalWriter(store), [[_entry("a")], [_entry("b"), _entry("c")]])
    finally:
        if backend_url.startswith("postgresql"):
            _allow_connections(sa.make_url(backend_url), allow=True)
            # The session's own pooled connection to this database was terminated too: it is
            # replaced at its next use once idle for longer than the pool's ping threshold.
            time.sleep(2 * drivers.IDLE_PING_SECONDS)
        store.dispose()
    assert len(answers) == 2
    for failure in answers:
        assert isinstance(failure, JournalUnavailable)
        assert "the database failed while journaling" in failure.message


def test_a_stopped_writer_refuses_new_requests_and_answered_the_earlier_ones(backend_url: str) -> None:
    store = Store(backend_url)
    writer = JournalWriter(store)

    async def scenario() -> list[Journaled]:
        earlier = asyncio.ensure_future(writer.journal([_entry("earlier")]))
        await asyncio.sleep(0)  # handed in
        await writer.stop()
        assert earlier.done()
        with pytest.raises(JournalUnavailable, match="shutting down"):
            await writer.journal([_entry("late")])
        return earlier.result()

    assert asyncio.run(scenario()) == [True]
    assert _journaled_keys(store) == ["earlier"]
    store.dispose()


def test_every_column_of_a_journaled_event_reads_back_as_written(backend_url: str) -> None:
    """``events.append`` sends PostgreSQL the rows as one JSON document: nothing may be lost or
    reshaped on the way (times to the microsecond, absent and present UUIDs, any JSON)."""
    store = Store(backend_url)
    payload = {"eventTime": "x", "nested": {"list": [1, 2.5, None, True], "text": "é \\ \" ' \n ☃"}}
    when = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    run_id = uuid.uuid4()
    written = [
        JournalEntry("k1", "START", when, run_id, NS, "job", payload, canonical_json(payload)),
        JournalEntry("k2", None, when, None, None, None, {"dataset": {}}, canonical_json({"dataset": {}})),
    ]
    now = datetime(2026, 5, 6, 7, 8, 9, 1, tzinfo=UTC)
    with store.write() as connection:
        assert events.append(connection, written, now) == {"k1", "k2"}
    # The server's writer on PostgreSQL: the same statement, sent on an event-loop connection.
    connections = store.event_loop_connections()
    if connections is not None:
        again = [JournalEntry(f"async-{e.event_key}", *astuple(e)[1:]) for e in written]

        async def append_async() -> set[str]:
            assert connections is not None
            try:
                return set(
                    await connections.fetch_column(*events.append_statement(connections.dialect, again, now))
                )
            finally:
                await connections.close()

        assert asyncio.run(append_async()) == {"async-k1", "async-k2"}
        written += again
    with store.read() as connection:
        rows = connection.execute(sa.select(lineage_events).order_by(lineage_events.c.id)).all()
    columns = ("event_key", "event_type", "event_time", "run_id", "job_namespace", "job_name", "payload")
    read = [JournalEntry(*(getattr(r, c) for c in columns), canonical_json(r.payload)) for r in rows]
    assert read == written
    assert {r.received_at for r in rows} == {now}
    store.dispose()
