"""Gap reports and backfill over REST, against the real server on both databases."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
import requests

from api.conftest import ApiServer
from lotline.services import Lineage
from lotline.store.engine import Store
from support.lots import LotWorld

RANGE = {"from": "2023-01-01", "to": "2023-01-01T06:00:00Z"}


def hour(n: int) -> str:
    return f"20230101PT1H{n:03d}"


@pytest.fixture
def world(api_server: ApiServer, fresh_ns: str) -> Iterator[LotWorld]:
    """raw: hours 00-04 READY, 05 failed; cleaned: 00-01 complete, 02 failed, 03-04 missing,
    05 blocked (raw 05 failed)."""
    lineage = Lineage.over(Store(api_server.db_url))
    world = LotWorld(lineage, fresh_ns)
    world.job("land", output="raw")
    world.job("clean", output="cleaned", inputs=["raw"])
    world.produce("land", *[hour(n) for n in range(5)])
    failed = world.claim("land", hour(5))
    assert failed is not None
    world.lots.fail(failed)
    for n in range(3):
        claim = world.claim("clean", hour(n))
        assert claim is not None
        if n < 2:
            world.lots.complete(claim)
        else:
            world.lots.fail(claim, error="ValueError: bad row")
    yield world
    lineage.close()


def _bounds(start: int, end: int) -> dict[str, str]:
    """A run's bounds from hour ``start`` to hour ``end`` of 2023-01-01: in UTC, both forms agree."""
    at = {"start": f"2023-01-01T{start:02d}:00:00Z", "end": f"2023-01-01T{end:02d}:00:00Z"}
    return {**at, "startUtc": at["start"], "endUtc": at["end"]}


def _url(server: ApiServer, *parts: str) -> str:
    return server.api("/" + "/".join(quote(p, safe="") for p in parts))


def test_job_and_dataset_gaps_with_paged_runs(
    api_server: ApiServer, world: LotWorld, http: requests.Session
) -> None:
    answer = http.get(
        _url(api_server, "namespaces", world.ns, "jobs", "clean", "gaps"), params=RANGE, timeout=10
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["dataset"], body["job"], body["interval"], body["zone"], body["totalLots"]) == (
        "cleaned",
        "clean",
        "PT1H",
        "UTC",
        6,
    )
    assert (body["from"], body["to"]) == ("2023-01-01T00:00:00Z", "2023-01-01T06:00:00Z")
    assert body["counts"] == {
        "complete": 2,
        "stale": 0,
        "running": 0,
        "failed": 1,
        "missing": 2,
        "held": 0,
        "blocked": 1,
        "pending": 0,
    }
    assert body["runs"] == [
        {
            "state": "failed",
            "from": hour(2),
            "to": hour(2),
            **_bounds(2, 3),
            "count": 1,
            "waitingOn": None,
            "attempt": 1,
            "reason": "ValueError: bad row",
            "gaveUpAfter": None,
            "madeByVersion": None,
            "currentVersion": None,
        },
        {
            "state": "missing",
            "from": hour(3),
            "to": hour(4),
            **_bounds(3, 5),
            "count": 2,
            "waitingOn": None,
            "attempt": None,
            "reason": None,
            "gaveUpAfter": None,
            "madeByVersion": None,
            "currentVersion": None,
        },
        {
            "state": "blocked",
            "from": hour(5),
            "to": hour(5),
            **_bounds(5, 6),
            "count": 1,
            "waitingOn": {"dataset": "raw", "from": hour(5), "to": hour(5), "state": "failed"},
            "attempt": None,
            "reason": None,
            "gaveUpAfter": None,
            "madeByVersion": None,
            "currentVersion": None,
        },
    ]
    assert body["totalRuns"] == 3
    dataset_url = _url(api_server, "namespaces", world.ns, "datasets", "cleaned", "gaps")
    paged = http.get(dataset_url, params={**RANGE, "limit": 1, "offset": 1}, timeout=10).json()
    assert (paged["runs"], paged["totalRuns"]) == (body["runs"][1:2], 3)


@pytest.mark.parametrize(
    ("path", "params", "status", "message"),
    [
        (("jobs", "clean", "gaps"), {"from": "2023-01-02", "to": "2023-01-01"}, 400, "must be before"),
        (("jobs", "clean", "gaps"), {"from": "soon", "to": "2023-01-01"}, 400, "RFC 3339"),
        (("jobs", "clean", "gaps"), {"from": "2000-01-01", "to": "2023-01-01"}, 400, "ten years"),
        (("jobs", "nope", "gaps"), RANGE, 404, "nope"),
        (("datasets", "nope", "gaps"), RANGE, 404, "nope"),
    ],
)
def test_bad_requests_are_4xx_with_a_message(
    api_server: ApiServer,
    world: LotWorld,
    http: requests.Session,
    path: tuple[str, ...],
    params: dict[str, str],
    status: int,
    message: str,
) -> None:
    answer = http.get(_url(api_server, "namespaces", world.ns, *path), params=params, timeout=10)
    assert answer.status_code == status, answer.text
    assert message in answer.json()["message"]


def test_backfill_needs_the_token_and_a_dry_run_changes_nothing(
    api_server: ApiServer, world: LotWorld, http: requests.Session
) -> None:
    url = _url(api_server, "namespaces", world.ns, "jobs", "clean", "backfill")
    before = world.table()
    assert requests.post(url, params=RANGE, timeout=10).status_code == 401
    bad = http.post(url, params={**RANGE, "only": "running"}, timeout=10)
    assert bad.status_code == 400 and "cannot take 'running'" in bad.json()["message"]
    dry = http.post(url, params={**RANGE, "dryRun": "true"}, timeout=10)
    assert dry.status_code == 200, dry.text
    plan = dry.json()
    assert plan["dryRun"] is True
    assert [(r["from"], r["to"]) for r in plan["reopened"]] == [(hour(0), hour(1))]
    assert [(r["state"], r["from"], r["to"]) for r in plan["hinted"]] == [
        ("failed", hour(2), hour(2)),
        ("missing", hour(3), hour(4)),
    ]
    assert [r["state"] for r in plan["left"]] == ["blocked"]
    assert world.table() == before
    done = http.post(url, params={**RANGE, "only": ["complete", "failed"]}, timeout=10).json()
    assert (done["dryRun"], [r["from"] for r in done["reopened"]], done["cascaded"]) == (False, [hour(0)], 0)
    assert [r["state"] for r in done["hinted"]] == ["failed"]
    assert world.status("cleaned", hour(0), "clean") == "RESUBMIT"
    assert world.status("cleaned", hour(1), "clean") == "RESUBMIT"
