"""The lot-coordination REST extension against a real server: status rows, arc states, operator moves."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
import requests

from api.conftest import ApiServer
from lotline.services import Lineage
from lotline.store.engine import Store
from support.lots import LotWorld

DAYS = ["2023-01-01", "2023-01-02", "2023-01-03", "2023-01-04", "2023-01-05"]


@pytest.fixture
def world(api_server: ApiServer, fresh_ns: str) -> Iterator[LotWorld]:
    """raw (5 READY lots) -> clean: 01 and 02 done, 03 failed, 04 running, 05 untouched."""
    lineage = Lineage.over(Store(api_server.db_url))
    world = LotWorld(lineage, fresh_ns)
    world.job("ingest", output="raw")
    world.job("clean", output="cleaned", inputs=["raw"])
    world.produce("ingest", *DAYS)
    for day in DAYS[:2]:
        claim = world.claim("clean", day)
        assert claim is not None
        world.lots.complete(claim)
    failed = world.claim("clean", DAYS[2])
    assert failed is not None
    world.lots.fail(failed, error="disk full")
    assert world.claim("clean", DAYS[3], worker="busy-worker") is not None
    yield world
    lineage.close()


def _url(server: ApiServer, *parts: str) -> str:
    return server.api("/" + "/".join(quote(p, safe="") for p in parts))


def _lots(http: requests.Session, url: str, **params: object) -> dict[str, object]:
    answer = http.get(url, params=params, timeout=10)
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


def test_job_lots_with_arc_states_filters_and_paging(
    api_server: ApiServer, world: LotWorld, http: requests.Session
) -> None:
    url = _url(api_server, "namespaces", world.ns, "jobs", "clean", "lots")
    everything = _lots(http, url)
    rows = everything["lots"]
    assert isinstance(rows, list)
    assert [(r["lot"], r["status"], r["arcState"], r["error"]) for r in rows] == [
        (DAYS[0], "READY", "complete", None),
        (DAYS[1], "READY", "complete", None),
        (DAYS[2], "ERROR", "partial", "disk full"),  # why it failed, in one line
        (DAYS[3], "RUNNING", "running", None),
    ]
    assert everything["totalCount"] == 4
    assert rows[3]["owner"] == "busy-worker" and rows[3]["leaseExpiresAt"].endswith("Z")
    assert _lots(http, url, status="READY")["totalCount"] == 2
    assert _lots(http, url, status=["READY", "ERROR"])["totalCount"] == 3
    ranged = _lots(http, url, **{"from": DAYS[1], "to": DAYS[2]})
    assert [r["lot"] for r in ranged["lots"]] == DAYS[1:3]  # type: ignore[union-attr]
    paged = _lots(http, url, limit=1, offset=1)
    assert ([r["lot"] for r in paged["lots"]], paged["totalCount"]) == ([DAYS[1]], 4)  # type: ignore[union-attr]
    inputs = _lots(http, url, role="INPUT")["lots"]
    assert {(r["dataset"], r["lot"], r["status"]) for r in inputs} == {  # type: ignore[union-attr]
        ("raw", DAYS[0], "DONE"),
        ("raw", DAYS[1], "DONE"),
        ("raw", DAYS[2], "ERROR"),
        ("raw", DAYS[3], "RUNNING"),
    }
    assert _lots(http, url, role="ALL")["totalCount"] == 8


def test_dataset_lots(api_server: ApiServer, world: LotWorld, http: requests.Session) -> None:
    body = _lots(http, _url(api_server, "namespaces", world.ns, "datasets", "raw", "lots"))
    assert [(r["lot"], r["status"], r["job"]) for r in body["lots"]] == [  # type: ignore[union-attr]
        (day, "READY", "ingest") for day in DAYS
    ]


def test_invalidate_needs_the_token_then_cascades(
    api_server: ApiServer, world: LotWorld, http: requests.Session
) -> None:
    url = _url(api_server, "namespaces", world.ns, "datasets", "raw", "lots", DAYS[0], "invalidate")
    before = world.table()
    assert requests.post(url, timeout=10).status_code == 401
    assert world.table() == before
    answer = http.post(url, timeout=10)
    assert answer.status_code == 200, answer.text
    assert {r["name"] for r in answer.json()["reopened"]} == {"raw", "cleaned"}
    assert world.status("raw", DAYS[0], "ingest") == "RESUBMIT"
    assert world.status("cleaned", DAYS[0], "clean") == "RESUBMIT"


def test_hold_and_release_a_lot_and_a_job(
    api_server: ApiServer, world: LotWorld, http: requests.Session
) -> None:
    # The failed lot is eligible again (by name at once; its retry hint waits for the back-off).
    retry = world.claim("clean", DAYS[2])
    assert retry is not None and retry.lot == DAYS[2]
    world.lots.complete(retry)
    lot = _url(api_server, "namespaces", world.ns, "datasets", "raw", "lots", DAYS[4])
    assert http.post(lot + "/hold", timeout=10).json() == {"held": True, "changed": True}
    assert world.status("raw", DAYS[4], "ingest") == "HOLD"
    assert world.claim("clean", None) is None  # the only eligible lot is held
    assert http.post(lot + "/release", timeout=10).json() == {"held": False, "status": "READY"}
    job = _url(api_server, "namespaces", world.ns, "jobs", "clean")
    assert http.post(job + "/hold", timeout=10).json() == {"held": True, "changed": True}
    assert world.claim("clean", None) is None
    assert http.post(job + "/release", timeout=10).json() == {"held": False}
    claim = world.claim("clean", None)
    assert claim is not None and claim.lot == DAYS[4]


@pytest.mark.parametrize(
    ("method", "parts", "params", "status"),
    [
        ("GET", ["jobs", "nope", "lots"], {}, 404),
        ("GET", ["jobs", "clean", "lots"], {"status": "SLEEPING"}, 422),
        ("GET", ["jobs", "clean", "lots"], {"from": "../x"}, 400),
        ("GET", ["jobs", "clean", "lots"], {"role": "BOTH"}, 422),
        ("POST", ["datasets", "nope", "lots", DAYS[0], "invalidate"], {}, 404),
        ("POST", ["datasets", "raw", "lots", "bad lot", "hold"], {}, 400),
        ("POST", ["datasets", "raw", "lots", DAYS[0], "release"], {}, 409),
    ],
)
def test_bad_requests_are_clear_and_change_nothing(
    api_server: ApiServer,
    world: LotWorld,
    http: requests.Session,
    method: str,
    parts: list[str],
    params: dict[str, str],
    status: int,
) -> None:
    before = world.table()
    answer = http.request(method, _url(api_server, "namespaces", world.ns, *parts), params=params, timeout=10)
    assert answer.status_code == status, answer.text
    assert answer.json()["code"] == status and answer.json()["message"]
    assert world.table() == before
