"""``lotline webhooks``: deliver lot events to the configured URLs until stopped (docs/lots.md)."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Annotated

import typer

from lotline.domain.errors import DatabaseUnavailable, InvalidInput
from lotline.domain.secrets import masked_url
from lotline.services import open_configured
from lotline.services.config import load_settings
from lotline.services.outage import Outage
from lotline.services.webhooks import Delivery
from lotline.store.engine import Listener


def webhooks(
    poll: Annotated[
        float, typer.Option(min=0.05, help="Longest wait between looks when nothing wakes it (seconds).")
    ] = 1.0,
) -> None:
    """POST every new lot event to each URL of LOTLINE_WEBHOOK_URLS, in order, at least once, with
    back-off on failures; positions are kept in the database. Runs until SIGTERM or SIGINT."""
    settings = load_settings()
    if not settings.webhook_urls:
        raise InvalidInput("no webhook configured: set LOTLINE_WEBHOOK_URLS (comma-separated URLs).")
    with open_configured(settings, create=False) as lineage:
        stop = threading.Event()

        def on_signal(_signum: int, _frame: FrameType | None) -> None:
            stop.set()

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, on_signal)
        # One thread per URL delivers (a slow receiver holds up only its own; during a database outage
        # each waits quietly); this one listens for new events, wakes them, and says when the database
        # goes away and comes back.
        deliverers = lineage.webhooks.deliverers(settings.webhook_urls, _print, poll)
        outage = Outage(stop=stop)  # a database outage is waited out (docs/deploy.md)
        subscription: Listener | None = None
        deliverers.start()
        try:
            while not stop.is_set():
                try:
                    if subscription is None:
                        subscription = lineage.lot_events.subscribe()
                        outage.recovered()
                    subscription.wait(poll)
                    deliverers.wake()
                except DatabaseUnavailable as error:
                    if subscription is not None:
                        subscription.close()
                        subscription = None
                    outage.wait(error)
        finally:
            deliverers.stop()
            if subscription is not None:
                subscription.close()


_printing = threading.Lock()


def _print(result: Delivery) -> None:
    with _printing:
        if result.sent:
            print(f"{masked_url(result.url)}: {result.sent} events, position {result.position}", flush=True)
        elif result.error:
            print(f"{masked_url(result.url)}: failed ({result.error}); retrying later", flush=True)
