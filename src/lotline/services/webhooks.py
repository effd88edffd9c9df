"""Webhook delivery of lot events (SPEC §5 "Events"): at least once, in order per URL, retried with
a doubling back-off, its position kept in the database so a restarted deliverer resumes where the
last one stopped.

A URL seen for the first time starts at the end of the log: it gets the events appended from then
on (the history is in ``GET /api/v1/lots/events``). A batch is POSTed as ``{"events": [...]}``
(JSON, ``Content-Type: application/json``); any 2xx answer moves the position past it, anything else
(an error status, a refused connection, a timeout) keeps the position and schedules the next try
1 s, 2 s, 4 s … at most 5 minutes later. A deliverer that dies after the POST and before moving the
position sends the batch again: consumers de-duplicate by ``position``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from lotline.domain.errors import InvalidInput
from lotline.services.lot_events import LotEventService
from lotline.store.engine import Store
from lotline.store.queries import webhooks as q
from lotline.store.types import utcnow

BATCH = 100
FIRST_BACKOFF = timedelta(seconds=1)
MAX_BACKOFF = timedelta(minutes=5)
TIMEOUT_S = 10.0

#: Sends one body to a URL and returns the HTTP status (raises OSError when nothing answers).
Post = Callable[[str, bytes], int]


def http_post(url: str, body: bytes) -> int:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            status: int = answer.status
            return status
    except urllib.error.HTTPError as error:
        return error.code


@dataclass(frozen=True)
class Delivery:
    url: str
    sent: int  # events delivered by this call (0: nothing to send, or it failed)
    position: int
    error: str | None = None


class WebhookService:
    def __init__(self, store: Store, lot_events: LotEventService) -> None:
        self._store = store
        self._events = lot_events

    def deliver(self, url: str, *, post: Post = http_post, now: datetime | None = None) -> Delivery:
        """Send the next batch of events to ``url`` if its back-off allows; one call, one batch."""
        if not url.startswith(("http://", "https://")):
            raise InvalidInput(f"webhook URL {url!r} is not an http(s) URL.")
        now = now or utcnow()
        with self._store.write() as connection:
            row = q.ensure(connection, url, self._events.last_position(), now)
        if row.next_attempt_at is not None and row.next_attempt_at > now:
            return Delivery(url, 0, row.position, row.last_error)
        events = self._events.after(row.position, limit=BATCH)
        if not events:
            return Delivery(url, 0, row.position)
        body = json.dumps({"events": [e.to_json() for e in events]}).encode()
        try:
            status = post(url, body)
            error = None if 200 <= status < 300 else f"HTTP {status}"
        except OSError as failure:
            error = f"{type(failure).__name__}: {failure}"
        with self._store.write() as connection:
            if error is None:
                q.delivered(connection, url, row.position, events[-1].position, now)
                return Delivery(url, len(events), events[-1].position)
            failures = row.failures + 1
            delay = min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** (failures - 1))
            q.failed(connection, url, failures, error, now + delay, now)
        return Delivery(url, 0, row.position, error)
