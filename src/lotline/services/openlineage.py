"""OpenLineage ingestion (SPEC §6): validate, journal, answer; projection happens after.

An accepted event is parsed (a bad one is refused and changes nothing) and appended to the
``lineage_events`` journal in one statement per request, a batch in one multi-row statement;
``services/projection.py`` then applies the journal to the lineage model in the order received.
A repeat of an event already journaled is stored once and so applied once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import DataError

from lotline.domain.errors import InvalidInput, LotlineError
from lotline.domain.model import JsonObject, Page
from lotline.domain.openlineage import EventKind, event_key, parse_event
from lotline.services import _common
from lotline.store.engine import Store
from lotline.store.queries import events, graph, jobs
from lotline.store.types import utcnow


@dataclass(frozen=True)
class Accepted:
    """What a request's events came to: how many were journaled for the first time, how many
    were repeats of journaled ones, and (index, reason) of each refused one."""

    fresh: int
    duplicates: int
    refused: tuple[tuple[int, str], ...] = ()


class OpenLineageService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def accept(self, payload: Any) -> bool:
        """Journal one event; raises for a bad one (nothing stored). False if already journaled."""
        entry = _entry(payload)
        with self._store.one_statement() as connection:
            return events.append(connection, [entry], utcnow()) == 1

    def accept_batch(self, payloads: Sequence[Any]) -> Accepted:
        """Journal every good event of a batch in one statement, in order; bad ones are refused
        one by one and do not stop the others."""
        entries: list[events.JournalEntry] = []
        good: list[int] = []
        refused: list[tuple[int, str]] = []
        for index, payload in enumerate(payloads):
            try:
                entries.append(_entry(payload))
                good.append(index)
            except LotlineError as error:
                refused.append((index, error.message))
        refused_before = len(refused)
        if not entries:
            return Accepted(0, 0, tuple(refused))
        try:
            with self._store.write() as connection:  # one statement, but it may be sent in pages
                fresh = events.append(connection, entries, utcnow())
            return Accepted(fresh, len(entries) - fresh, tuple(refused))
        except DataError:
            pass  # the database refused a value in one of them: find which, one by one
        fresh = 0
        for index, entry in zip(good, entries, strict=True):
            try:
                with self._store.one_statement() as connection:
                    fresh += events.append(connection, [entry], utcnow())
            except DataError as error:
                refused.append((index, f"a value was rejected by the database: {_first_line(error)}"))
        return Accepted(fresh, len(entries) - fresh - (len(refused) - refused_before), tuple(sorted(refused)))

    def job_facets(self, namespace: str, job: str) -> JsonObject:
        """Facets OpenLineage events reported for the job, merged by facet name."""
        with self._store.read() as connection:
            found = graph.job_id(connection, namespace, job)
            return jobs.job_facets(connection, [found]).get(found, {}) if found else {}

    def list_events(
        self, before: datetime | None = None, after: datetime | None = None, limit: int = 100, offset: int = 0
    ) -> Page[JsonObject]:
        _common.check_page(limit, offset)
        _common.check_aware("before", before)
        _common.check_aware("after", after)
        with self._store.read() as connection:
            return events.list_events(connection, before, after, limit, offset)


def _first_line(error: DataError) -> str:
    return str(error.orig).splitlines()[0] if error.orig is not None else str(error)


def _entry(payload: Any) -> events.JournalEntry:
    if not isinstance(payload, dict):
        raise InvalidInput("an event must be a JSON object.")
    event = parse_event(payload)
    return events.JournalEntry(
        event_key=event_key(payload),
        event_type=event.event_type if event.kind is EventKind.RUN else None,
        event_time=event.event_time,
        run_id=event.run_id,
        job_namespace=event.job.namespace if event.job else None,
        job_name=event.job.name if event.job else None,
        payload=payload,
    )
