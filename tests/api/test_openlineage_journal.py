"""Journal-then-project through a real server: status endpoint, failures that never fail the POST,
metrics, and a server stopped with a backlog whose next start applies it."""

from __future__ import annotations

import uuid
from contextlib import ExitStack
from typing import Any

import requests

from api.conftest import AUTH, ApiServer, _serve
from lotline.domain.openlineage import run_uuid
from lotline.services.openlineage import OpenLineageService
from lotline.services.projection import READ_CATCH_UP_EVENTS, ProjectionService
from lotline.store.engine import Store
from lotline.store.queries import events
from support.ol import run_event, run_history
from support.polling import wait_until


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
        # no read catches up here
        wait_until(lambda: not _status(url)["pending"], timeout=120, what="the journal to be projected")
        assert _status(url) == {"pending": 0, "failed": 0, "lastAppliedId": len(batch)}
        for run_id in runs:
            run = requests.get(f"{url}/api/v1/jobs/runs/{run_uuid(run_id)}", timeout=10).json()
            assert (run["state"], run["facets"]["step"]["n"]) == ("COMPLETED", 3)
    finally:
        server.should_exit = True
        thread.join(timeout=60)


def test_a_read_under_a_backlog_answers_from_what_is_projected_and_says_how_much_is_pending(
    backend_url: str,
) -> None:
    """More than ``READ_CATCH_UP_EVENTS`` pending while the projector's lock is held elsewhere (as by a
    projector busy with a burst): reads answer at once, from what is projected, with the backlog in
    ``X-Lineage-Pending``, on a web page and in ``/healthz``; ``Prefer: wait`` reads the writes."""
    ns = f"backlog-{uuid.uuid4().hex[:6]}"
    first, later = str(uuid.uuid4()), [str(uuid.uuid4()) for _ in range(READ_CATCH_UP_EVENTS // 4 + 1)]
    store = Store(backend_url)
    try:
        openlineage, projection = OpenLineageService(store), ProjectionService(store)
        openlineage.accept_batch(run_history(ns, "etl", first, steps=1))
        projection.drain()
        backlog = [e for run_id in later for e in run_history(ns, "etl", run_id, steps=1)]
        openlineage.accept_batch(backlog)
        assert len(backlog) > READ_CATCH_UP_EVENTS
        with ExitStack() as holding:
            holder = holding.enter_context(store.write())
            events.lock_projection(holder, wait=True)  # no projector can apply anything now
            server, thread, url = _serve(backend_url)
            try:
                quote = requests.utils.quote
                run = requests.get(f"{url}/api/v1/jobs/runs/{later[0]}", headers=AUTH, timeout=30)
                assert run.status_code == 404 and run.headers["X-Lineage-Pending"] == str(len(backlog))
                runs = requests.get(
                    f"{url}/api/v1/namespaces/{quote(ns, safe='')}/jobs/etl/runs", headers=AUTH, timeout=30
                )
                assert [r["id"] for r in runs.json()["runs"]] == [first]
                assert runs.headers["X-Lineage-Pending"] == str(len(backlog))
                page = requests.get(f"{url}/?ns={quote(ns, safe='')}", timeout=30)
                assert page.status_code == 200 and page.headers["X-Lineage-Pending"] == str(len(backlog))
                assert f"{len(backlog)} OpenLineage events are journaled but not applied yet" in page.text
                health = requests.get(f"{url}/healthz", timeout=30).json()
                assert health["pendingEvents"] == len(backlog)
                assert _status(url)["pending"] == len(backlog)
                holding.close()  # the lock goes: a read that asks to wait now sees every write
                waited = requests.get(
                    f"{url}/api/v1/jobs/runs/{later[-1]}", headers={**AUTH, "Prefer": "wait=30"}, timeout=60
                )
                assert waited.status_code == 200 and waited.json()["state"] == "COMPLETED"
                assert "X-Lineage-Pending" not in waited.headers
                assert waited.headers["Preference-Applied"] == "wait=30"
                assert requests.get(f"{url}/healthz", timeout=30).json()["pendingEvents"] == 0
            finally:
                server.should_exit = True
                thread.join(timeout=60)
    finally:
        store.dispose()
