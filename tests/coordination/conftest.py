"""Fixtures of the coordination suite; each test runs on SQLite and PostgreSQL (``lineage``)."""

from __future__ import annotations

import pytest

from lotline.services import Lineage
from support.lots import LotWorld


@pytest.fixture
def world(lineage: Lineage) -> LotWorld:
    return LotWorld(lineage)
