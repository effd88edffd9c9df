"""OpenLineage ingestion (SPEC §6): validate, journal, answer; projection happens after.

An accepted event is parsed (a bad one is refused and changes nothing) and appended to the
``lineage_events`` journal in one statement per request, a batch in one multi-row statement;
``services/projection.py`` then applies the journal to the lineage model in the order received.
A repeat of an event already journaled is stored once and so applied once.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.errors import InvalidInput, LotlineError, ValueRefused
from lotline.domain.model import JsonObject, Page
from lotline.domain.openlineage import ACTIONS, EventKind, canonical_json, key_of_canonical, parse_event
from lotline.services import _common
from lotline.store.engine import Store
from lotline.store.queries import events, graph, jobs
from lotline.store.types import utcnow

#: The run event types of OpenLineage's spec: the event listing's type filter takes these.
EVENT_TYPES = tuple(ACTIONS)
#: The orders of the event listing, newest first by default (Marquez's ``sortDirection``).
SORT_DIRECTIONS = ("desc", "asc")

#: What journaling did with one event: True new, False a repeat, or why the database refused it.
Journaled = bool | InvalidInput


@dataclass(frozen=True)
class Accepted:
    """What a request's events came to: how many were journaled for the first time, how many
    were repeats of journaled ones, and (index, reason) of each refused one."""

    fresh: int
    duplicates: int
    refused: tuple[tuple[int, str], ...] = ()


class OpenLineageService:
    def __init__(self, store: Store, clock: Clock = SYSTEM_CLOCK) -> None:
        self._store = store
        self._clock = clock

    def accept(self, payload: Any) -> bool:
        """Journal one event; raises for a bad one (nothing stored). False if already journaled."""
        result = journal(self._store, [journal_entry(payload)])[0]
        if isinstance(result, InvalidInput):
            raise result
        return result

    def accept_batch(self, payloads: Sequence[Any]) -> Accepted:
        """Journal every good event of a batch in one statement, in order; bad ones are refused
        one by one and do not stop the others."""
        batch = Batch.of(payloads)
        return batch.outcome(journal(self._store, batch.entries))

    def record(self, entries: Sequence[events.JournalEntry]) -> None:
        """Journal the events of lotline's own runs (``journal_entry``), which it recorded directly:
        stored as applied, so the projector never applies them a second time (docs/api.md); listed
        like any event. A lot's end journals its events in its own transaction instead
        (``LotService.complete``), the same way."""
        with self._store.one_statement() as connection:
            events.append(connection, entries, self._clock.now(), applied=True)

    def job_facets(self, namespace: str, job: str) -> JsonObject:
        """Facets OpenLineage events reported for the job, merged by facet name."""
        with self._store.read() as connection:
            found = graph.job_id(connection, namespace, job)
            return jobs.job_facets(connection, [found]).get(found, {}) if found else {}

    def list_events(
        self,
        before: datetime | None = None,
        after: datetime | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        job_namespace: str | None = None,
        job_name: str | None = None,
        event_type: str | None = None,
        run_id: uuid.UUID | None = None,
        run_events_only: bool = False,
        sort_direction: str = "desc",
    ) -> Page[JsonObject]:
        """The journaled events, newest first (``sort_direction="asc"``: oldest first), narrowed by
        time, job, event type or run; ``run_events_only`` leaves out DatasetEvents and JobEvents
        (Marquez's ``GET /events/lineage`` lists RunEvents only)."""
        _common.check_page(limit, offset)
        _common.check_aware("before", before)
        _common.check_aware("after", after)
        if event_type is not None and event_type not in EVENT_TYPES:
            raise InvalidInput(f"eventType must be one of {', '.join(EVENT_TYPES)}, got {event_type!r}.")
        if sort_direction.lower() not in SORT_DIRECTIONS:
            raise InvalidInput(
                f"sortDirection must be one of {', '.join(SORT_DIRECTIONS)}, got {sort_direction[:40]!r}."
            )
        where = events.EventFilter(
            before, after, job_namespace, job_name, event_type, run_id, run_events_only=run_events_only
        )
        oldest_first = sort_direction.lower() == "asc"
        with self._store.read() as connection:
            return events.list_events(connection, where, limit, offset, oldest_first=oldest_first)


@dataclass(frozen=True)
class Batch:
    """A batch's valid events, where they were in it, and (index, reason) of the refused ones."""

    entries: list[events.JournalEntry]
    positions: list[int]
    refused: list[tuple[int, str]]

    @classmethod
    def of(cls, payloads: Sequence[Any]) -> Batch:
        batch = cls([], [], [])
        for index, payload in enumerate(payloads):
            try:
                batch.entries.append(journal_entry(payload))
                batch.positions.append(index)
            except LotlineError as error:
                batch.refused.append((index, error.message))
        return batch

    def outcome(self, results: Sequence[Journaled]) -> Accepted:
        """What the batch came to, given what ``journal`` did with its valid events."""
        refused = list(self.refused)
        fresh = duplicates = 0
        for index, result in zip(self.positions, results, strict=True):
            if isinstance(result, InvalidInput):
                refused.append((index, result.message))
            elif result:
                fresh += 1
            else:
                duplicates += 1
        return Accepted(fresh, duplicates, tuple(sorted(refused)))


def journal(store: Store, entries: Sequence[events.JournalEntry]) -> list[Journaled]:
    """Journal the events in one statement and one transaction (a group commit), in order.

    If the database refuses a value of one of them (e.g. a NUL character in JSON on PostgreSQL),
    they are journaled one by one, so that only that one is refused. An event repeated within
    ``entries`` is new at its first position only. Other database errors propagate.
    """
    if not entries:
        return []
    # Up to MAX_ROWS rows are one statement, atomic by itself; more are sent in several.
    transaction = store.one_statement if len(entries) <= events.MAX_ROWS else store.write
    try:
        with transaction() as connection:
            new = events.append(connection, entries, utcnow())
    except ValueRefused:
        return journal_one_by_one(store, entries)
    return outcomes(entries, new)


def journal_one_by_one(store: Store, entries: Sequence[events.JournalEntry]) -> list[Journaled]:
    """Each event in a statement of its own: after the database refused a value of a group, so
    that only the event that has it is refused."""
    return [_journal_alone(store, entry) for entry in entries]


def outcomes(entries: Sequence[events.JournalEntry], new: set[str]) -> list[Journaled]:
    """Which entries were new, given the keys journaled: a repeat within ``entries`` is new at its
    first position only."""
    results: list[Journaled] = []
    for entry in entries:
        results.append(entry.event_key in new)
        new.discard(entry.event_key)
    return results


def _journal_alone(store: Store, entry: events.JournalEntry) -> Journaled:
    try:
        with store.one_statement() as connection:
            return bool(events.append(connection, [entry], utcnow()))
    except ValueRefused as error:
        return error


def journal_entry(payload: Any) -> events.JournalEntry:
    """A validated event as the journal stores it; raises ``LotlineError`` for a bad one."""
    if not isinstance(payload, dict):
        raise InvalidInput("an event must be a JSON object.")
    event = parse_event(payload)
    canonical = canonical_json(payload)
    return events.JournalEntry(
        event_key=key_of_canonical(canonical),
        event_type=event.event_type if event.kind is EventKind.RUN else None,
        event_time=event.event_time,
        run_id=event.run_id,
        job_namespace=event.job.namespace if event.job else None,
        job_name=event.job.name if event.job else None,
        payload=payload,
        payload_json=canonical,
    )
