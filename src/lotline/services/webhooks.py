"""Webhook delivery of lot events (SPEC §5 "Events"): at least once, in order per URL, retried with
a doubling back-off, its position kept in the database so a restarted deliverer resumes where the
last one stopped. Each URL is delivered to by a thread of its own (``Deliverers``), and each POST
has a deadline for its whole answer (``DEADLINE_S``): a slow receiver delays only itself.

A URL seen for the first time starts at the end of the log: it gets the events appended from then
on (the history is in ``GET /api/v1/lots/events``). A batch is POSTed as ``{"events": [...]}``
(JSON, ``Content-Type: application/json``); any 2xx answer moves the position past it, anything else
(an error status, a refused connection, no whole answer within the deadline) keeps the position
and schedules the next try 1 s, 2 s, 4 s … at most 5 minutes later. A deliverer that dies after
the POST and before moving the position sends the batch again: consumers de-duplicate by
``position``.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from lotline.domain.errors import DatabaseUnavailable, InvalidInput, LotlineError
from lotline.domain.secrets import masked_text, masked_url
from lotline.services.lot_events import LotEventService
from lotline.services.outage import Outage
from lotline.store.engine import Store
from lotline.store.queries import webhooks as q
from lotline.store.types import utcnow

log = logging.getLogger(__name__)

BATCH = 100
FIRST_BACKOFF = timedelta(seconds=1)
MAX_BACKOFF = timedelta(minutes=5)
#: Seconds a receiver has for its whole answer, from the connection to the end of its headers: a
#: receiver that drips a byte now and then (each within any per-read timeout) is cut off too.
DEADLINE_S = 10.0

#: Sends one body to a URL and returns the HTTP status (raises OSError when nothing answers).
Post = Callable[[str, bytes], int]


def http_post(url: str, body: bytes, *, deadline_s: float = DEADLINE_S) -> int:
    """POST ``body`` as JSON and return the answer's status; ``TimeoutError`` when the answer's
    status and headers are not all there within ``deadline_s`` (the connection is then shut
    down, which ends whatever read waits on it)."""
    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname or "", parts.port, timeout=deadline_s)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        if connection.sock is not None:
            with suppress(OSError):  # already closed
                connection.sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(deadline_s, expire)
    timer.daemon = True
    timer.start()
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request("POST", target, body, {"Content-Type": "application/json"})
        status: int = connection.getresponse().status
    except (OSError, http.client.HTTPException) as failure:
        if expired.is_set():
            raise TimeoutError(f"no whole answer within {deadline_s:g} s") from None
        if isinstance(failure, OSError):
            raise
        raise ConnectionError(f"{type(failure).__name__}: {failure}") from None
    finally:
        timer.cancel()
        connection.close()
    if expired.is_set():  # the answer came, but after the deadline: the same as none
        raise TimeoutError(f"no whole answer within {deadline_s:g} s")
    return status


@dataclass(frozen=True)
class Delivery:
    url: str
    sent: int  # events delivered by this call (0: nothing to send, or it failed)
    position: int
    error: str | None = None
    #: When the next attempt may be made (after a failure; None: at once).
    retry_at: datetime | None = None


class WebhookService:
    def __init__(self, store: Store, lot_events: LotEventService) -> None:
        self._store = store
        self._events = lot_events

    def deliver(self, url: str, *, post: Post = http_post, now: datetime | None = None) -> Delivery:
        """Send the next batch of events to ``url`` if its back-off allows; one call, one batch."""
        if not url.startswith(("http://", "https://")):
            raise InvalidInput(f"webhook URL {masked_url(url)!r} is not an http(s) URL.")
        now = now or utcnow()
        with self._store.write() as connection:
            row = q.ensure(connection, url, self._events.last_position(), now)
        if row.next_attempt_at is not None and row.next_attempt_at > now:
            return Delivery(url, 0, row.position, row.last_error, row.next_attempt_at)
        events = self._events.after(row.position, limit=BATCH)
        if not events:
            return Delivery(url, 0, row.position)
        body = json.dumps({"events": [e.to_json() for e in events]}).encode()
        try:
            status = post(url, body)
            error = None if 200 <= status < 300 else f"HTTP {status}"
        except OSError as failure:
            error = masked_text(f"{type(failure).__name__}: {failure}")  # it may quote the URL
        with self._store.write() as connection:
            if error is None:
                q.delivered(connection, url, row.position, events[-1].position, now)
                return Delivery(url, len(events), events[-1].position)
            failures = row.failures + 1
            delay = min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** (failures - 1))
            q.failed(connection, url, failures, error, now + delay, now)
        return Delivery(url, 0, row.position, error, now + delay)

    def deliverers(self, urls: Sequence[str], report: Callable[[Delivery], None], poll: float) -> Deliverers:
        """Threads that deliver to ``urls``, one per URL, until stopped (``lotline webhooks``)."""
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise InvalidInput(f"webhook URL {masked_url(url)!r} is not an http(s) URL.")
        return Deliverers(self, tuple(dict.fromkeys(urls)), report, poll)


def _thread_name(url: str) -> str:
    return f"webhook {masked_url(url)}"


class Deliverers:
    """One thread per URL, each delivering batch after batch while there are events, then waiting
    for ``wake()`` (new events), for its back-off after a failure, or at most ``poll`` seconds.
    A URL whose receiver is slow or down holds up its own thread only: the others go on."""

    def __init__(
        self, service: WebhookService, urls: Sequence[str], report: Callable[[Delivery], None], poll: float
    ) -> None:
        self._service = service
        self._report = report
        self._poll = poll
        self._stop = threading.Event()
        self._woken = {url: threading.Event() for url in urls}
        self._threads = [
            threading.Thread(
                target=self._deliver, args=(url,), name=f"webhook {masked_url(url)}", daemon=True
            )
            for url in urls
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def wake(self) -> None:
        """New events may have been appended: every URL that waits for them looks now."""
        for woken in self._woken.values():
            woken.set()

    def stop(self, timeout: float = DEADLINE_S + 5) -> None:
        """Stop after the POSTs in progress (each ends within its deadline)."""
        self._stop.set()
        self.wake()
        for thread in self._threads:
            thread.join(timeout)

    def _deliver(self, url: str) -> None:
        woken = self._woken[url]
        # The caller's listening loop says when the database goes and comes back (once, not per URL).
        outage = Outage(log.debug, stop=self._stop)
        failing = False
        while not self._stop.is_set():
            woken.clear()  # before looking: an event appended from now on wakes the next wait
            try:
                result = self._service.deliver(url)
            except DatabaseUnavailable as error:
                outage.wait(error)
                continue
            except Exception as error:  # anything else: this URL tries again, said once
                if not failing:
                    if not isinstance(error, LotlineError):
                        log.exception("webhook %s", masked_url(url))
                    self._report(Delivery(url, 0, -1, f"{getattr(error, 'message', None) or error}"))
                failing = True
                self._stop.wait(self._poll)
                continue
            outage.recovered()
            failing = False
            if result.sent or result.error:
                self._report(result)
            if result.sent:
                continue  # there may be more
            if result.retry_at is not None:
                self._stop.wait(max(0.0, (result.retry_at - utcnow()).total_seconds()))
            else:
                woken.wait(self._poll)
