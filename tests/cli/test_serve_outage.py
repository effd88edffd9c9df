"""``lotline serve`` through database outages (issue 39.16): one line when the database goes away,
one when it is back, and no traceback, however many requests come meanwhile. (A 60 s stop used to
write 6,245 lines with 141 tracebacks.) The server runs as a user runs it, a separate process, over
a PostgreSQL server of the test's own that the test stops and starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests

from support.ol import run_event
from support.pg_cluster import ThrowawayPostgres
from support.polling import wait_until

GONE = "database unavailable"
BACK = "database available again"


def _requests(base: str) -> list[int]:
    """What clients keep sending: reads, the web UI's start page, an event, the health check."""
    event = json.dumps(run_event("outage", "job", str(uuid.uuid4()), "START")).encode()
    statuses = []
    for _ in range(5):
        for path in ("/api/v1/namespaces", "/api/v1/jobs", "/", "/healthz"):
            statuses.append(requests.get(base + path, timeout=30).status_code)
        posted = requests.post(
            base + "/api/v1/lineage", data=event, headers={"Content-Type": "application/json"}, timeout=30
        )
        statuses.append(posted.status_code)
    return statuses


@pytest.mark.postgres
def test_serve_says_once_that_the_database_went_away_and_once_that_it_is_back(
    own_postgres: ThrowawayPostgres, tmp_path: Path
) -> None:
    port = own_postgres.port + 1000
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")}
    env["LOTLINE_DB_URL"] = own_postgres.url
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log_file:
        server = subprocess.Popen(
            [sys.executable, "-m", "lotline", "serve", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return requests.get(base + "/healthz", timeout=5).status_code == 200
        except requests.ConnectionError:
            return False

    try:
        wait_until(healthy, timeout=120, what="lotline serve to come up")
        assert set(_requests(base)) <= {200, 201}
        # Twice: the projector process may still be starting at the first outage (it then waits it
        # out before it opens the store); at the second it is running, its loop meets it.
        for outage in (1, 2):
            own_postgres.stop()
            assert 503 in _requests(base)
            wait_until(
                lambda n=outage: log_path.read_text().count(GONE) == n,
                timeout=120,
                what="the outage to be said",
            )
            assert 503 in _requests(base)
            own_postgres.resume()
            wait_until(healthy, timeout=120, what="lotline serve to recover")
            wait_until(
                lambda n=outage: log_path.read_text().count(BACK) == n,
                timeout=120,
                what="the recovery to be said",
            )
            assert set(_requests(base)) <= {200, 201}
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    log = log_path.read_text()
    assert "Traceback" not in log, log
    assert log.count(GONE) == 2 and log.count(BACK) == 2, log
    lines = [line for line in log.splitlines() if "database" in line.lower()]
    assert len(lines) == 4, log
