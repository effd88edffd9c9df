"""Operator use cases on the database itself."""

from __future__ import annotations

from lotline.domain.errors import Conflict
from lotline.store.engine import Store
from lotline.store.migrate import head_revision


def upgrade_database(url: str) -> str:
    """Migrate the database at ``url`` to this lotline's schema; returns the revision it is at."""
    store = Store(url)
    try:
        store.upgrade()
        revision = store.schema_revision()
    finally:
        store.dispose()
    head = head_revision()
    if revision != head or revision is None:
        raise Conflict(
            f"The database is at revision {revision} after the upgrade, not at {head}.", current=revision
        )
    return revision
