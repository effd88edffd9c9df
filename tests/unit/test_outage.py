"""``outage.retried``: how a worker records a lot's failure whose transaction the database gave up on
(issue 39.19): tried again until it commits, with one line when the database goes and one when it
is back; after the last try the error reaches the caller (the lot is then reaped after its lease)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from lotline.domain.errors import DatabaseUnavailable
from lotline.services.outage import Outage, retried


def _flaky(failures: int, calls: list[str]) -> Callable[[], str]:
    def action() -> str:
        calls.append("try")
        if len(calls) <= failures:
            raise DatabaseUnavailable("the database is unavailable", detail="deadlock detected")
        return "recorded"

    return action


def _outage(said: list[str]) -> Outage:
    stopped = threading.Event()
    stopped.set()  # no wait between tries: the policy is under test, not the clock
    return Outage(said.append, stop=stopped)


def test_a_failure_the_database_gave_up_on_is_recorded_on_a_later_try() -> None:
    said: list[str] = []
    calls: list[str] = []
    assert retried(_flaky(2, calls), _outage(said), 6) == "recorded"
    assert len(calls) == 3
    assert said == [
        "database unavailable (deadlock detected); retrying",
        "database available again; resuming",
    ]


def test_after_the_last_try_the_error_reaches_the_caller() -> None:
    said: list[str] = []
    calls: list[str] = []
    with pytest.raises(DatabaseUnavailable):
        retried(_flaky(10, calls), _outage(said), 3)
    assert len(calls) == 3
    assert said == ["database unavailable (deadlock detected); retrying"]
