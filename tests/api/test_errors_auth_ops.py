"""Errors as ``{"code", "message"}`` that change nothing, bearer auth on writes, health and metrics."""

from __future__ import annotations

import gzip
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest
import requests

from api.conftest import AUTH, ApiServer
from support.ol import run_event


def count_namespaces(http: requests.Session, server: ApiServer) -> int:
    total: int = http.get(server.api("/namespaces"), timeout=10).json()["totalCount"]
    return total


def test_writes_need_the_token_reads_do_not(api_server: ApiServer, fresh_ns: str) -> None:
    path = api_server.api(f"/namespaces/{quote(fresh_ns, safe='')}")
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
        answer = requests.put(path, json={"ownerName": "me"}, headers=headers, timeout=10)
        assert answer.status_code == 401
        assert answer.json()["code"] == 401
    assert requests.get(path, timeout=10).status_code == 404  # open read; the write never happened
    assert requests.post(api_server.api("/lineage"), json={}, timeout=10).status_code == 401
    assert requests.get(api_server.api("/namespaces"), timeout=10).status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("PUT", "/namespaces/%2E%2E", {"ownerName": "x"}, 400),
        ("PUT", "/namespaces/a%2F..%2Fb", {"ownerName": "x"}, 400),
        ("PUT", "/namespaces/bad%00name", {"ownerName": "x"}, 400),
        ("PUT", "/namespaces/ok", "{not json", 400),
        ("PUT", "/namespaces/ok", '{"ownerName": "half \\ud800 pair"}', 400),  # no Unicode text
        ("PUT", "/namespaces/ok", {"ownerName": ["not", "a", "string"]}, 422),
        ("PUT", "/namespaces/ok", {"ownerName": "x", "description": "a\u0000b"}, 400),  # issue 29.12
        ("PUT", "/sources/s", {"connectionUrl": "x"}, 422),
        ("PUT", "/namespaces/missing-ns/datasets/d", {"type": "DB_TABLE"}, 404),
        ("PUT", "/namespaces/missing-ns/jobs/j", {"type": "BATCH"}, 404),
        ("GET", "/namespaces?limit=0", None, 422),
        ("GET", "/namespaces?offset=-1", None, 422),
        ("GET", "/jobs/runs/not-a-uuid", None, 422),
        ("POST", "/jobs/runs/00000000-0000-0000-0000-000000000000/start", None, 404),
        ("POST", "/jobs/runs/00000000-0000-0000-0000-000000000000/explode", None, 422),
        ("GET", "/lineage?nodeId=table:a:b", None, 400),
        ("GET", "/lineage?nodeId=dataset:nowhere:nothing", None, 404),
    ],
)
def test_bad_input_gets_a_clear_error_and_changes_nothing(
    api_server: ApiServer, http: requests.Session, method: str, path: str, body: object, status: int
) -> None:
    before = count_namespaces(http, api_server)
    if isinstance(body, str):
        headers = {"Content-Type": "application/json"}
        answer = http.request(method, api_server.api(path), data=body, headers=headers, timeout=10)
    else:
        answer = http.request(method, api_server.api(path), json=body, timeout=10)
    assert answer.status_code == status, answer.text
    assert set(answer.json()) == {"code", "message"} and answer.json()["code"] == status
    assert count_namespaces(http, api_server) == before


def test_oversized_body_is_413(api_server: ApiServer, http: requests.Session) -> None:
    big = b"[" + b"0," * (9 * 1024 * 1024) + b"0]"
    headers = {"Content-Type": "application/json"}
    answer = http.post(api_server.api("/lineage/batch"), data=big, headers=headers, timeout=30)
    assert (answer.status_code, answer.json()["code"]) == (413, 413)


@pytest.mark.parametrize("path", ["/lineage", "/lineage/batch", "/namespaces/streamed"])
def test_oversized_streamed_body_is_413(api_server: ApiServer, path: str) -> None:
    """No Content-Length to refuse up front: the body is counted as it arrives."""

    def chunks() -> Iterator[bytes]:
        yield b'{"pad": "'
        for _ in range(17):
            yield b"x" * (1024 * 1024)
        yield b'"}'

    headers = {**AUTH, "Content-Type": "application/json"}
    method = "PUT" if path.startswith("/namespaces") else "POST"
    answer = requests.request(method, api_server.api(path), data=chunks(), headers=headers, timeout=30)
    assert (answer.status_code, answer.json()["code"]) == (413, 413)


def test_gzip_body_inflating_past_the_limit_is_413(api_server: ApiServer) -> None:
    bomb = gzip.compress(b'{"pad": "' + b"x" * (17 * 1024 * 1024) + b'"}')
    assert len(bomb) < 100_000
    headers = {**AUTH, "Content-Type": "application/json", "Content-Encoding": "gzip"}
    answer = requests.post(api_server.api("/lineage"), data=bomb, headers=headers, timeout=30)
    assert (answer.status_code, answer.json()["code"]) == (413, 413)


def test_run_id_conflict_and_transition_time(
    api_server: ApiServer, http: requests.Session, fresh_ns: str
) -> None:
    q = quote(fresh_ns, safe="")
    runs = api_server.api(f"/namespaces/{q}/jobs/j/runs")
    http.put(api_server.api(f"/namespaces/{q}"), json={"ownerName": "me"}, timeout=10)
    http.put(api_server.api(f"/namespaces/{q}/jobs/j"), json={"type": "BATCH"}, timeout=10)
    created = http.post(runs, json={"args": {"a": "1"}}, timeout=10)
    assert created.status_code == 201 and created.headers["Location"].endswith(created.json()["id"])
    again = http.post(runs, json={"id": created.json()["id"]}, timeout=10)
    assert again.status_code == 409
    run_id = created.json()["id"]
    at = "?at=2026-01-01T00:00:00Z"
    started = http.post(api_server.api(f"/jobs/runs/{run_id}/start{at}"), timeout=10).json()
    end = "?at=2026-01-01T00:00:01.5Z"
    ended = http.post(api_server.api(f"/jobs/runs/{run_id}/complete{end}"), timeout=10).json()
    assert (started["startedAt"], ended["durationMs"]) == ("2026-01-01T00:00:00Z", 1500)
    naive = http.post(api_server.api(f"/jobs/runs/{run_id}/complete?at=2026-01-01T00:00:00"), timeout=10)
    assert naive.status_code == 400


def test_healthz_and_metrics(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> None:
    health = requests.get(f"{api_server.url}/healthz", timeout=10).json()
    assert health["status"] == "ok" and health["projector"]["alive"] is True
    requests.get(api_server.api("/namespaces"), timeout=10)
    # The event POSTs skip FastAPI's middleware (api/ingest.py) and are counted all the same.
    event = run_event(fresh_ns, "j", str(uuid.uuid4()), "START")
    assert http.post(api_server.api("/lineage"), json=event, timeout=10).status_code == 201
    assert http.post(api_server.api("/lineage"), json=[event], timeout=10).status_code == 400
    text = requests.get(f"{api_server.url}/metrics", timeout=10).text
    assert "# TYPE lotline_http_requests_total counter" in text
    assert 'lotline_http_requests_total{method="GET",path="/namespaces",status="200"}' in text
    for status in (201, 400):
        labels = f'method="POST",path="/api/v1/lineage",status="{status}"'
        assert f"lotline_http_requests_total{{{labels}}}" in text
    assert "lotline_http_request_duration_seconds_count" in text
    assert 'lotline_openlineage_events_total{result="applied"}' in text
