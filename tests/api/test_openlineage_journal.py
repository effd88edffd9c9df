"""Journal-then-project through a real server: status endpoint, failures that never fail the POST,
metrics, and a server stopped with a backlog whose next start applies it."""

from __future__ import annotations

import time
import uuid
from typing import Any

import requests

from api.conftest import AUTH, ApiServer, _serve
from lotline.domain.openlineage import run_uuid
from lotline.services.openlineage import OpenLineageService
from lotline.services.projection import ProjectionService
from lotline.store.engine import Store
from support.ol import run_event, run_history


def _status(server_url: str) -> dict[str, Any]:
    answer = requests.get(f"{server_url}/api/v1/lineage/status", timeout=10)
    assert answer.status_code == 200
    found: dict[str, Any] = answer.json()
    return found


def test_a_run_reported_under_another_job_is_accepted_then_recorded_as_failed(
    api_server: ApiServer, http: requests.Session, fresh_ns: str
) -> None:
    run_id = str(uuid.uuid4())
    before = _status(api_server.url)
    for job in ("owner", "thief"):
        answer = http.post(
            api_server.api("/lineage"), json=run_event(fresh_ns, job, run_id, "START"), timeout=10
        )
        assert answer.status_code == 201  # journaled: the conflict shows only in projection

    run = http.get(api_server.api(f"/jobs/runs/{run_id}"), timeout=10).json()  # reads catch up first
    assert (run["state"], run["jobVersion"], run["id"]) == ("RUNNING", None, run_id)
    after = _status(api_server.url)
    assert (after["pending"], after["failed"]) == (0, before["failed"] + 1)
    assert after["lastAppliedId"] >= (before["lastAppliedId"] or 0) + 2
    text = requests.get(f"{api_server.url}/metrics", timeout=10).text
    assert "lotline_lineage_journal_pending 0" in text
    assert f"lotline_lineage_journal_failed {after['failed']}" in text
    assert 'lotline_openlineage_events_total{result="accepted"}' in text


def test_reads_see_what_was_posted_before_them(
    api_server: ApiServer, http: requests.Session, fresh_ns: str
) -> None:
    runs = [str(uuid.uuid4()) for _ in range(3)]
    batch = [event for run_id in runs for event in run_history(fresh_ns, "etl", run_id, steps=2)]
    answer = http.post(api_server.api("/lineage/batch"), json=batch, timeout=30)
    assert answer.json()["summary"]["successful"] == len(batch)
    quote = requests.utils.quote
    versions = http.get(
        api_server.api(f"/namespaces/{quote(fresh_ns, safe='')}/datasets/etl-out/versions"), timeout=10
    )
    assert "X-Lineage-Pending" not in versions.headers
    assert versions.json()["totalCount"] == 3
    for run_id in runs:
        run = http.get(api_server.api(f"/jobs/runs/{run_id}"), timeout=10).json()
        assert (run["state"], run["facets"]["step"]["n"]) == ("COMPLETED", 2)


def test_a_server_stopped_with_a_backlog_leaves_it_pending_and_the_next_start_applies_it(
    backend_url: str,
) -> None:
    runs = [str(uuid.uuid4()) for _ in range(4)]
    batch = [event for run_id in runs for event in run_history("stopped", "etl", run_id, steps=3)]
    server, thread, url = _serve(backend_url)
    try:
        answer = requests.post(f"{url}/api/v1/lineage/batch", json=batch, headers=AUTH, timeout=30)
        assert answer.json()["summary"]["successful"] == len(batch)
    finally:
        server.should_exit = True  # at once: the projector may be anywhere in the backlog
        thread.join(timeout=60)
    store = Store(backend_url)
    try:
        status = ProjectionService(store).status()
        assert status.failed == 0
        # Every accepted event is in the journal exactly once, whether projected before the stop
        # or still pending (the restart below must apply the pending ones).
        journaled = OpenLineageService(store).list_events(limit=1).total_count
        assert journaled == len(batch)
        assert status.pending <= journaled
    finally:
        store.dispose()

    server, thread, url = _serve(backend_url)
    try:
        deadline = time.monotonic() + 120
        while _status(url)["pending"] and time.monotonic() < deadline:  # no read catches up here
            time.sleep(0.1)
        assert _status(url) == {"pending": 0, "failed": 0, "lastAppliedId": len(batch)}
        for run_id in runs:
            run = requests.get(f"{url}/api/v1/jobs/runs/{run_uuid(run_id)}", timeout=10).json()
            assert (run["state"], run["facets"]["step"]["n"]) == ("COMPLETED", 3)
    finally:
        server.should_exit = True
        thread.join(timeout=60)
