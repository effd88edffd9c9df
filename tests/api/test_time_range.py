"""Issue 14, point 3: times outside what the store can hold are a 400 at the door, on REST and as an
OpenLineage ``eventTime`` — and never fail the concurrent events journaled beside them (real
server, SQLite and PostgreSQL)."""

from __future__ import annotations

import threading
import uuid
from urllib.parse import quote

import requests

from api.conftest import AUTH, ApiServer
from support.ol import run_event

EDGE = "9999-12-31T23:59:59-14:00"  # valid RFC 3339; its UTC form is in year 10000


def _job(http: requests.Session, server: ApiServer, ns: str) -> str:
    http.put(server.api(f"/namespaces/{quote(ns, safe='')}"), json={"ownerName": "t"}, timeout=10)
    path = f"/namespaces/{quote(ns, safe='')}/jobs/job"
    assert http.put(server.api(path), json={"type": "BATCH", "inputs": [], "outputs": []}, timeout=10).ok
    return path


def test_rest_times_outside_the_store_are_400(
    api_server: ApiServer, fresh_ns: str, http: requests.Session
) -> None:
    path = _job(http, api_server, fresh_ns)
    created = http.post(api_server.api(path + "/runs"), json={"nominalStartTime": EDGE}, timeout=10)
    assert created.status_code == 400, created.text
    run = http.post(api_server.api(path + "/runs"), json={}, timeout=10).json()
    started = http.post(api_server.api(f"/jobs/runs/{run['id']}/start"), params={"at": EDGE}, timeout=10)
    assert started.status_code == 400, started.text
    assert "outside the times lotline stores" in started.json()["message"]
    for name in ("before", "after"):
        listed = http.get(api_server.api("/events/lineage"), params={name: EDGE}, timeout=10)
        assert listed.status_code == 400, (name, listed.text)


def test_an_event_time_outside_the_store_is_400_and_never_fails_its_neighbours(
    api_server: ApiServer, fresh_ns: str
) -> None:
    bad = run_event(fresh_ns, "job", str(uuid.uuid4()), "START")
    bad["eventTime"] = EDGE
    answers: list[int] = []

    def post(event: dict[str, object]) -> None:
        answer = requests.post(api_server.api("/lineage"), json=event, headers=AUTH, timeout=30)
        answers.append(answer.status_code)

    good = [run_event(fresh_ns, f"job{i}", str(uuid.uuid4()), "START") for i in range(40)]
    threads = [threading.Thread(target=post, args=(e,)) for e in [bad] * 10 + good]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == sorted([400] * 10 + [201] * 40)


def test_a_run_cannot_end_before_it_started(
    api_server: ApiServer, fresh_ns: str, http: requests.Session
) -> None:
    """Issue 14, point 5: REST refuses it (409); an OpenLineage end event from before the start is
    recorded at the start (its producer's clock), so durations are never negative."""
    path = _job(http, api_server, fresh_ns)
    run = http.post(api_server.api(path + "/runs"), json={}, timeout=10).json()
    assert http.post(api_server.api(f"/jobs/runs/{run['id']}/start"), timeout=10).status_code == 200
    ended = http.post(
        api_server.api(f"/jobs/runs/{run['id']}/complete"), params={"at": "1970-01-01T00:00:00Z"}, timeout=10
    )
    assert ended.status_code == 409, ended.text
    assert "before it started" in ended.json()["message"]
    assert http.get(api_server.api(f"/jobs/runs/{run['id']}"), timeout=10).json()["state"] == "RUNNING"

    run_id = str(uuid.uuid4())
    start = run_event(fresh_ns, "ol-job", run_id, "START", second=30)
    complete = run_event(fresh_ns, "ol-job", run_id, "COMPLETE", second=10)  # 20 s "before" the start
    for event in (start, complete):
        assert http.post(api_server.api("/lineage"), json=event, timeout=10).status_code in (200, 201)
    shown = http.get(api_server.api(f"/jobs/runs/{run_id}"), timeout=10).json()
    assert shown["state"] == "COMPLETED" and shown["durationMs"] == 0
