"""The world the UI tests look at, made through the services like workers and clients would.

One day (2023-01-01) of hour lots: ``land`` (a source) makes ``raw``, ``clean`` reads it and makes
``cleaned`` — every arc state a grid shows (``EXPECTED_LAND``, ``EXPECTED_CLEAN``)."""

from __future__ import annotations

from datetime import UTC, datetime

import requests

from lotline.domain.manifests import ManifestDraft
from lotline.services import Lineage
from lotline.services.lots import OutputWritten
from support.lots import LotWorld

NS = "ui"
DAY, NEXT_DAY = "2023-01-01", "2023-01-02"
ERROR = "ValueError: line 17 is not a log line"


def hour(n: int) -> str:
    return f"20230101PT1H{n:03d}"


def _expected(states: dict[int, str], default: str = "complete") -> dict[str, str]:
    return {hour(n): states.get(n, default) for n in range(24)}


#: Per lot of ``raw`` (job ``land``): 0 published empty, 3 reopened by invalidation, 22 failed, 23 never made.
EXPECTED_LAND = _expected({0: "empty", 3: "missing", 22: "failed", 23: "missing"})
#: Per lot of ``cleaned`` (job ``clean``).
EXPECTED_CLEAN = _expected(
    {
        3: "blocked",  # reopened by the cascade, and raw 03 is not ready
        10: "running",
        11: "failed",
        12: "failed",  # failed, then cleaned: failed all the same
        13: "held",
        **dict.fromkeys(range(14, 22), "missing"),
        22: "blocked",
        23: "blocked",
    }
)


def seed(lineage: Lineage) -> LotWorld:
    world = LotWorld(lineage, NS)
    world.job("land", output="raw")
    world.job("clean", output="cleaned", inputs=["raw"])
    for n in range(22):
        claim = world.claim("land", hour(n))
        assert claim is not None
        location = lineage.storage.attempt_uri(NS, "raw", hour(n), claim.attempt)
        draft = ManifestDraft(location, (), row_count=0) if n == 0 else None
        lineage.lots.complete(claim, outputs={claim.dataset: OutputWritten(draft)})
    failed = world.claim("land", hour(22))
    assert failed is not None
    lineage.lots.fail(failed, error=ERROR)
    for n in range(10):
        claim = world.claim("clean", hour(n))
        assert claim is not None
        lineage.lots.complete(claim)
    assert world.claim("clean", hour(10), worker="busy") is not None
    for n in (11, 12):
        claim = world.claim("clean", hour(n))
        assert claim is not None
        lineage.lots.fail(claim, error=ERROR)
    lineage.lots.clean(NS, "clean", hour(12))
    lineage.lots.hold_lot(NS, "cleaned", hour(13))
    lineage.lots.invalidate(NS, "raw", hour(3))
    return world


#: A second namespace for the grid's proportions: ten days of hour lots of ``hourly`` (a source
#: job), 94 % done — every day has an empty lot, some days a failed, missing or running lot — and
#: two five-minute lots of ``fine``, a day apart at its edges.
GRID_NS = "grid"
GRID_DAYS = 10
#: The worlds' now: the ten days are over and due (PT5M after their end), the 11th's first hour pending.
NOW = datetime(2023, 1, 1 + GRID_DAYS, 0, 5, tzinfo=UTC)
#: (day, hour) of the lots of ``hourly`` that are not done, and their states.
NOT_DONE = {
    (2, 5): "failed",
    (4, 0): "missing",
    (4, 1): "missing",
    (6, 9): "running",
    **{(9, h): "missing" for h in range(12, 24)},
}


def hourly(day: int, hour_of_day: int) -> str:
    return f"202301{day + 1:02d}PT1H{hour_of_day:03d}"


def seed_grid(lineage: Lineage) -> LotWorld:
    world = LotWorld(lineage, GRID_NS)
    world.job("hourly", output="hours")
    world.job("fine", output="minutes")
    for day in range(GRID_DAYS):
        for h in range(24):
            state = NOT_DONE.get((day, h))
            if state == "missing":
                continue
            claim = world.claim("hourly", hourly(day, h), worker="busy" if state == "running" else "worker-1")
            assert claim is not None
            if state == "failed":
                lineage.lots.fail(claim, error=ERROR)
            elif state is None:
                empty = h == 3
                location = lineage.storage.attempt_uri(GRID_NS, "hours", hourly(day, h), claim.attempt)
                draft = ManifestDraft(location, (), row_count=0) if empty else None
                lineage.lots.complete(claim, outputs={claim.dataset: OutputWritten(draft)})
    world.produce("fine", "20230101PT5M000", "20230101PT5M287")
    world.job("late", output="later", inputs=["hours"])  # started on day 6: its lots are due from day 1
    for h in range(3):
        claim = world.claim("late", hourly(5, h))
        assert claim is not None
        lineage.lots.complete(claim)
    return world


def send_event(url: str, token: str, **event: object) -> None:
    """One OpenLineage run event sent to the server at ``url``, as a client sends it."""
    schema = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent"
    body = {"producer": "https://example.com/tests", "schemaURL": schema, **event}
    answer = requests.post(
        f"{url}/api/v1/lineage", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    assert answer.status_code in (200, 201), answer.text
