"""Webhook delivery positions: one row per URL (``webhook_deliveries``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, select, update

from lotline.store.dialect import insert_ignoring_conflicts
from lotline.store.schema import webhook_deliveries


def ensure(connection: Connection, url: str, position: int, now: datetime) -> Row[Any]:
    """The URL's row, created at ``position`` if it is new (an existing row is left as it is)."""
    row = {"url": url, "position": position, "failures": 0, "created_at": now, "updated_at": now}
    insert_ignoring_conflicts(connection, webhook_deliveries, [row], ["url"])
    return connection.execute(select(webhook_deliveries).where(webhook_deliveries.c.url == url)).one()


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
