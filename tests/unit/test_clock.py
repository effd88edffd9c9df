"""The manual clock that tests advance instead of sleeping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lotline.domain.clock import ManualClock
from lotline.domain.errors import InvalidInput


def test_a_manual_clock_moves_only_when_advanced_and_only_forward() -> None:
    clock = ManualClock(datetime(2023, 1, 1, tzinfo=UTC))
    assert clock.now() == clock.now() == datetime(2023, 1, 1, tzinfo=UTC)
    clock.advance(timedelta(seconds=90))
    assert (clock.now(), clock.monotonic()) == (datetime(2023, 1, 1, 0, 1, 30, tzinfo=UTC), 90.0)
    with pytest.raises(InvalidInput):
        clock.advance(timedelta(seconds=-1))
    with pytest.raises(InvalidInput):
        ManualClock(datetime(2023, 1, 1))
    assert clock.now() == datetime(2023, 1, 1, 0, 1, 30, tzinfo=UTC)
