"""Which instants lotline stores: any aware time whose UTC form is a valid date (years 1-9999).

``9999-12-31T23:59:59-14:00`` is a valid RFC 3339 text, but its UTC form is in year 10000, which
neither Python nor SQLite can hold: refused at the door (400), never a server error while it is
written (docs/api.md "Limits").
"""

from __future__ import annotations

from datetime import UTC, datetime

from lotline.domain.errors import InvalidInput


def check_storable(label: str, value: datetime) -> datetime:
    """``value`` if it has an offset and its UTC form exists; InvalidInput naming ``label`` if not."""
    if value.tzinfo is None:
        raise InvalidInput(f"{label} {value.isoformat()} has no time zone offset.")
    try:
        value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise InvalidInput(
            f"{label} {value.isoformat()} is outside the times lotline stores "
            "(0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z)."
        ) from None
    return value
