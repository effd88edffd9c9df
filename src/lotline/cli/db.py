"""``lotline db``: the database's schema."""

from __future__ import annotations

from lotline.services.admin import upgrade_database
from lotline.services.config import load_settings


def upgrade() -> None:
    """Create or migrate the database schema to this version of lotline."""
    settings = load_settings()
    revision = upgrade_database(settings.db_url)
    print(f"database is at schema revision {revision}")
