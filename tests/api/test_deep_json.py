"""Issue 14, points 1 and 2: JSON nested too deep is refused at the door with a 400, and what was
stored that deep before (by a lotline that did not check) is shown cut, never a failed listing —
against a real server, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

import pytest
import requests

from api.conftest import ApiServer
from lotline.domain.errors import InvalidInput
from lotline.domain.json_depth import CUT, MAX_JSON_DEPTH, bounded, check_depth
from lotline.services import Lineage
from lotline.store.engine import Store
from support.ol import run_event


def _nested(levels: int) -> Any:
    """``levels`` arrays inside one another (the issue's repro: n times ``[`` then n times ``]``)."""
    return json.loads("[" * levels + "]" * levels)


def test_an_event_nested_too_deep_is_refused_and_listings_keep_working(
    api_server: ApiServer, fresh_ns: str, http: requests.Session
) -> None:
    poison = run_event(fresh_ns, "job", str(uuid.uuid4()), "START", facets={"p": _nested(252)})
    answer = http.post(api_server.api("/lineage"), json=poison, timeout=10)
    assert answer.status_code == 400, answer.text
    assert set(answer.json()) == {"code", "message"} and "deeper than" in answer.json()["message"]
    batch = http.post(
        api_server.api("/lineage/batch"),
        json=[poison, run_event(fresh_ns, "ok", str(uuid.uuid4()), "START")],
        timeout=10,
    )
    assert batch.status_code == 200, batch.text
    assert batch.json()["summary"]["failed"] == 1 and batch.json()["summary"]["successful"] == 1
    for path in ("/jobs", f"/namespaces/{quote(fresh_ns, safe='')}/jobs", "/events/lineage"):
        assert http.get(api_server.api(path), timeout=10).status_code == 200, path


def test_bodies_deeper_than_the_parser_goes_are_a_400(api_server: ApiServer, http: requests.Session) -> None:
    body = ("[" * 1100 + "]" * 1100).encode()
    for path in ("/lineage", "/lineage/batch"):
        answer = http.post(
            api_server.api(path), data=body, headers={"Content-Type": "application/json"}, timeout=10
        )
        assert answer.status_code == 400, (path, answer.text)
        assert set(answer.json()) == {"code", "message"}


def test_facets_stored_too_deep_are_shown_cut(
    api_server: ApiServer, fresh_ns: str, http: requests.Session
) -> None:
    """A run whose facets were stored nested 252 deep (as an older lotline accepted them)."""
    with Lineage.over(Store(api_server.db_url)) as lineage:
        lineage.catalog.upsert_namespace(fresh_ns, owner_name="tests")
        lineage.catalog.upsert_job(fresh_ns, "job")
        run = lineage.runs.create_run(fresh_ns, "job", facets={"p": _nested(252)})
    for path in ("/jobs", f"/namespaces/{quote(fresh_ns, safe='')}/jobs", f"/jobs/runs/{run.id}"):
        answer = http.get(api_server.api(path), timeout=10)
        assert answer.status_code == 200, (path, answer.text)
    shown = http.get(api_server.api(f"/jobs/runs/{run.id}"), timeout=10).json()["facets"]["p"]
    depth = 1
    while isinstance(shown, list) and shown:
        shown, depth = shown[0], depth + 1
    assert shown == CUT and depth == MAX_JSON_DEPTH


def test_depth_rules() -> None:
    check_depth(_nested(MAX_JSON_DEPTH), "x")
    with pytest.raises(InvalidInput, match="deeper than"):
        check_depth(_nested(MAX_JSON_DEPTH + 1), "x")
    assert bounded({"a": [1, {"b": 2}]}) == {"a": [1, {"b": 2}]}
    assert bounded([[[]]], limit=2) == [[CUT]]


def test_nan_infinity_and_huge_numbers_are_refused_on_every_database(
    api_server: ApiServer, fresh_ns: str, http: requests.Session
) -> None:
    """Issue 14, point 7: SQLite stored them as null, PostgreSQL refused them: now a 400 on both."""
    event = json.dumps(run_event(fresh_ns, "job", str(uuid.uuid4()), "START", facets={"x": {"v": 1}}))
    for bad in ("NaN", "Infinity", "-Infinity", "1e400"):
        body = event.replace('"v": 1', f'"v": {bad}').encode()
        answer = http.post(
            api_server.api("/lineage"), data=body, headers={"Content-Type": "application/json"}, timeout=10
        )
        assert answer.status_code == 400, (bad, answer.text)
        assert set(answer.json()) == {"code", "message"}
