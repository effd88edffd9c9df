"""Where the services and coordination take the time from: one clock, injected, so that tests
advance time instead of sleeping through leases.

``now()`` is the wall clock (aware UTC) that leases, run times and stamps are written in;
``monotonic()`` counts seconds for durations (how long something waited). Loops that only measure
durations take a ``Callable[[], float]`` — a clock's bound ``monotonic`` fits it.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

from lotline.domain.errors import InvalidInput


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start; never goes back."""
        ...


class SystemClock:
    """The machine's clocks."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


#: The clock everything uses unless it is given another one.
SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that stands still until ``advance`` moves it (tests). It starts at ``start``, by
    default the system's time when it is made, so that what it stamps sorts with what the rest of
    the system stamps."""

    def __init__(self, start: datetime | None = None) -> None:
        if start is not None and start.utcoffset() is None:
            raise InvalidInput("A clock's start must be an aware time.")
        self._now = (start or datetime.now(UTC)).astimezone(UTC)
        self._monotonic = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, by: timedelta) -> None:
        if by < timedelta(0):
            raise InvalidInput(f"A clock only goes forward, not by {by}.")
        self._now += by
        self._monotonic += by.total_seconds()
