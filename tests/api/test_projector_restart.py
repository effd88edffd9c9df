"""Issue 14, point 6: a projector killed on its own is started again, ``/healthz`` says the server is
degraded until it is, and the events journaled meanwhile are applied."""

from __future__ import annotations

import os
import signal
import uuid
from urllib.parse import quote

import requests

from api.conftest import AUTH, _serve
from support.ol import run_event
from support.polling import wait_until


def test_a_killed_projector_is_restarted_and_reported(backend_url: str) -> None:
    server, thread, url = _serve(backend_url)
    try:
        health = requests.get(url + "/healthz", timeout=10).json()
        assert health["status"] == "ok" and health["projector"]["restarts"] == 0
        os.kill(health["projector"]["pid"], signal.SIGKILL)
        wait_until(
            lambda: requests.get(url + "/healthz", timeout=10).status_code != 200,
            timeout=10,
            what="the dead projector to be reported",
        )
        degraded = requests.get(url + "/healthz", timeout=10)
        assert degraded.status_code == 503 and degraded.json()["status"] == "degraded"
        ns = f"proj-{uuid.uuid4().hex[:6]}"
        event = run_event(ns, "job", str(uuid.uuid4()), "START")
        assert requests.post(url + "/api/v1/lineage", json=event, headers=AUTH, timeout=10).status_code == 201
        wait_until(
            lambda: requests.get(url + "/healthz", timeout=10).status_code == 200,
            timeout=30,
            what="the projector to be restarted",
            every=0.2,
        )
        health = requests.get(url + "/healthz", timeout=10)
        assert health.json()["projector"]["restarts"] == 1
        jobs = requests.get(url + f"/api/v1/namespaces/{quote(ns, safe='')}/jobs", timeout=30).json()
        assert [j["name"] for j in jobs["jobs"]] == ["job"]
        wait_until(
            lambda: not requests.get(url + "/api/v1/lineage/status", timeout=10).json()["pending"],
            timeout=30,
            what="the projector to apply the pending events",
            every=0.2,
        )
    finally:
        server.should_exit = True
        thread.join(timeout=30)
