"""Webhook delivery positions: one row per URL (``webhook_deliveries``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, bindparam, select, update

from lotline.store.dialect import insert_ignoring_conflicts
from lotline.store.schema import webhook_deliveries


@dataclass(frozen=True, slots=True)
class WebhookPosition:
    """Where delivery to one URL stands: the last position delivered, and its back-off."""

    url: str
    position: int
    failures: int
    last_error: str | None
    next_attempt_at: datetime | None


_POSITION = select(
    webhook_deliveries.c.url,
    webhook_deliveries.c.position,
    webhook_deliveries.c.failures,
    webhook_deliveries.c.last_error,
    webhook_deliveries.c.next_attempt_at,
).where(webhook_deliveries.c.url == bindparam("b_url"))


def ensure(connection: Connection, url: str, position: int, now: datetime) -> WebhookPosition:
    """The URL's position, created at ``position`` if it is new (an existing row is left as it is)."""
    row = {"url": url, "position": position, "failures": 0, "created_at": now, "updated_at": now}
    insert_ignoring_conflicts(connection, webhook_deliveries, [row], ["url"])
    return WebhookPosition(*connection.execute(_POSITION, {"b_url": url}).one())


def delivered(connection: Connection, url: str, expected: int, position: int, now: datetime) -> bool:
    """Move the position forward from ``expected`` (False: another deliverer moved it first)."""
    done = connection.execute(
        update(webhook_deliveries)
        .where(webhook_deliveries.c.url == url, webhook_deliveries.c.position == expected)
        .values(position=position, failures=0, last_error=None, next_attempt_at=None, updated_at=now)
    )
    return done.rowcount == 1


def failed(
    connection: Connection, url: str, failures: int, error: str, next_attempt_at: datetime, now: datetime
) -> None:
    connection.execute(
        update(webhook_deliveries)
        .where(webhook_deliveries.c.url == url)
        .values(failures=failures, last_error=error[:2000], next_attempt_at=next_attempt_at, updated_at=now)
    )
