"""``lotline webhooks``: deliver lot events to the configured URLs until stopped (docs/lots.md)."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Annotated

import typer

from lotline.domain.errors import DatabaseUnavailable, InvalidInput
from lotline.services import open_configured
from lotline.services.config import load_settings
from lotline.services.outage import Outage
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
    lineage = open_configured(settings)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    outage = Outage(stop=stop)  # a database outage is waited out (docs/deploy.md)
    subscription: Listener | None = None
    try:
        while not stop.is_set():
            try:
                if subscription is None:
                    subscription = lineage.lot_events.subscribe()
                results = [lineage.webhooks.deliver(url) for url in settings.webhook_urls]
                outage.recovered()
                for result in results:
                    if result.sent:
                        print(f"{result.url}: {result.sent} events, position {result.position}", flush=True)
                    elif result.error:
                        print(f"{result.url}: failed ({result.error}); retrying later", flush=True)
                if not any(r.sent for r in results):
                    subscription.wait(poll)
            except DatabaseUnavailable as error:
                if subscription is not None:
                    subscription.close()
                    subscription = None
                outage.wait(error)
    finally:
        if subscription is not None:
            subscription.close()
        lineage.close()
