"""Fixtures of the coordination suite; each test runs on SQLite and PostgreSQL (``lineage``)."""

from __future__ import annotations

import pytest

from lotline.domain.clock import ManualClock
from lotline.services import Lineage
from support.lots import LotWorld


@pytest.fixture
def world(lineage: Lineage) -> LotWorld:
    return LotWorld(lineage)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def timed_world(lineage: Lineage, clock: ManualClock) -> LotWorld:
    """A world whose lot coordination takes its time from ``clock``: leases run out when the test
    advances it. (On PostgreSQL that is the Python claim path: the claim functions read the
    database's clock; ``test_claim_functions.py`` covers their leases.)"""
    return LotWorld(Lineage.over(lineage.store, lineage.storage, clock=clock))
