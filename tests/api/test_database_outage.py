"""Issue 14, point 4: while the database is unreachable every REST endpoint answers 503 with
``Retry-After`` (never a 500), the web UI a 503 page, and the server recovers by itself when it
is back."""

from __future__ import annotations

import pytest
import requests

from api.conftest import AUTH, _serve
from support.pg_cluster import ThrowawayPostgres


@pytest.mark.postgres
def test_rest_answers_503_while_the_database_is_down_and_recovers(own_postgres: ThrowawayPostgres) -> None:
    server, thread, url = _serve(own_postgres.url)
    try:
        paths = ["/api/v1/namespaces", "/api/v1/jobs", "/api/v1/lots/events", "/api/v1/search?q=x"]
        for path in paths:
            assert requests.get(url + path, headers=AUTH, timeout=10).status_code == 200, path
        own_postgres.stop()
        for path in paths:
            answer = requests.get(url + path, headers=AUTH, timeout=30)
            assert answer.status_code == 503, (path, answer.text)
            assert answer.headers.get("Retry-After") == "1" and set(answer.json()) == {"code", "message"}
        put = requests.put(url + "/api/v1/namespaces/down", json={"ownerName": "x"}, headers=AUTH, timeout=30)
        assert put.status_code == 503, put.text
        # The web UI's pages and graph documents say so too (web/render.failure).
        start = requests.get(url + "/", timeout=30)
        assert start.status_code == 503 and "The database is unreachable" in start.text, start.text
        graph = requests.get(url + "/lineage/graph.json", params={"node": "job:ns:j"}, timeout=30)
        assert graph.status_code == 503 and graph.json()["code"] == 503, graph.text
        own_postgres.resume()
        for path in paths:
            assert requests.get(url + path, headers=AUTH, timeout=30).status_code == 200, path
    finally:
        server.should_exit = True
        thread.join(timeout=30)
