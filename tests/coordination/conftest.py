"""Fixtures of the coordination suite; each test runs on SQLite and PostgreSQL (``lineage``)."""

from __future__ import annotations

import os

import pytest

from lotline.services import Lineage
from support.lots import LotWorld


@pytest.fixture
def world(lineage: Lineage) -> LotWorld:
    return LotWorld(lineage)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` run only with ``LOTLINE_SLOW=1`` (CI sets it; see .ci/run)."""
    if os.environ.get("LOTLINE_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow acceptance run; set LOTLINE_SLOW=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
