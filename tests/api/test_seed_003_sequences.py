"""Seed 003's three REST call sequences (static, dynamic, unified), each ending in success and failure.

Every call is a plain HTTP request as a Marquez integration would send it; the asserts check
the resulting run state and dataset versions against SPEC §2 and §3.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

import pytest
import requests

from api.conftest import ApiServer


class Marquez:
    """The seed's REST calls, by name."""

    def __init__(self, server: ApiServer, http: requests.Session, ns: str) -> None:
        self.server, self.http, self.ns = server, http, ns
        self.q = quote(ns, safe="")

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, status: int = 200) -> Any:
        answer = self.http.request(method, self.server.api(path), json=body, timeout=10)
        assert answer.status_code == status, f"{method} {path}: {answer.status_code} {answer.text}"
        return answer.json()

    def put_namespace(self) -> None:
        self.call("PUT", f"/namespaces/{self.q}", {"ownerName": "seed-003"})

    def put_source(self) -> None:
        self.call(
            "PUT", "/sources/warehouse", {"type": "POSTGRESQL", "connectionUrl": "postgres://db:5432/wh"}
        )

    def put_dataset(self, name: str, run_id: str | None = None) -> Any:
        body = {"type": "DB_TABLE", "physicalName": name, "sourceName": "warehouse"}
        if run_id:
            body["runId"] = run_id
        return self.call("PUT", f"/namespaces/{self.q}/datasets/{quote(name, safe='')}", body)

    def put_job(self, io: bool, run_id: str | None = None) -> Any:
        body: dict[str, Any] = {"type": "BATCH", "location": "git://repo@abc"}
        if io:
            body["inputs"] = [{"namespace": self.ns, "name": "public.input"}]
            body["outputs"] = [{"namespace": self.ns, "name": "public.output"}]
        if run_id:
            body["runId"] = run_id
        return self.call("PUT", f"/namespaces/{self.q}/jobs/job", body)

    def create_run(self) -> str:
        run = self.call("POST", f"/namespaces/{self.q}/jobs/job/runs", {}, status=201)
        assert run["state"] == "NEW"
        return str(run["id"])

    def transition(self, run_id: str, action: str, status: int = 200) -> Any:
        return self.call("POST", f"/jobs/runs/{run_id}/{action}", status=status)

    def run(self, run_id: str) -> Any:
        return self.call("GET", f"/jobs/runs/{run_id}")

    def versions(self, name: str) -> list[tuple[int, str, str | None]]:
        page = self.call("GET", f"/namespaces/{self.q}/datasets/{quote(name, safe='')}/versions")
        found = page["versions"]
        return [(v["versionNumber"], v["state"], (v["createdByRun"] or {}).get("id")) for v in found]

    def current(self, name: str) -> Any:
        return self.call("GET", f"/namespaces/{self.q}/datasets/{quote(name, safe='')}")["currentVersion"]


@pytest.fixture
def marquez(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> Marquez:
    return Marquez(api_server, http, fresh_ns)


OUTCOMES = [("complete", "COMPLETED", "current"), ("fail", "FAILED", "failed")]


def check_outcome(m: Marquez, run_id: str, state: str, version_state: str) -> None:
    run = m.run(run_id)
    assert run["state"] == state
    [read] = run["inputDatasetVersions"]
    assert read["datasetVersionId"]["name"] == "public.input"
    assert m.versions("public.input") == [(1, "current", None)]  # rule 1: V1 without a run
    assert read["datasetVersionId"]["version"] == m.current("public.input")  # rule 2: pinned
    assert m.versions("public.output") == [(1, version_state, run_id)]  # rule 3: one version either way
    [written] = run["outputDatasetVersions"]
    expected_current = written["datasetVersionId"]["version"] if version_state == "current" else None
    assert m.current("public.output") == expected_current  # rule 4: current only on success


@pytest.mark.parametrize(("action", "state", "version_state"), OUTCOMES, ids=["success", "failure"])
def test_static_inspection(marquez: Marquez, action: str, state: str, version_state: str) -> None:
    m = marquez
    m.put_namespace()
    m.put_source()
    m.put_dataset("public.input")
    m.put_dataset("public.output")
    m.put_job(io=True)
    run_id = m.create_run()
    assert m.transition(run_id, "start")["state"] == "RUNNING"
    assert m.versions("public.output") == []  # nothing written yet
    m.put_dataset("public.output", run_id=run_id)  # end: the write refers to the run
    m.transition(run_id, action)
    check_outcome(m, run_id, state, version_state)


@pytest.mark.parametrize(("action", "state", "version_state"), OUTCOMES, ids=["success", "failure"])
def test_dynamic_inspection(marquez: Marquez, action: str, state: str, version_state: str) -> None:
    m = marquez
    m.put_namespace()
    m.put_job(io=False)
    run_id = m.create_run()
    m.transition(run_id, "start")
    m.put_source()
    m.put_dataset("public.input")
    m.put_dataset("public.output", run_id=run_id)
    job = m.put_job(io=True, run_id=run_id)  # the job, now with its inputs and outputs, for this run
    m.transition(run_id, action)
    check_outcome(m, run_id, state, version_state)
    assert m.run(run_id)["jobVersion"]["version"] == job["currentVersion"]


@pytest.mark.parametrize(("action", "state", "version_state"), OUTCOMES, ids=["success", "failure"])
def test_unified(marquez: Marquez, action: str, state: str, version_state: str) -> None:
    m = marquez
    m.put_namespace()
    m.put_source()
    m.put_dataset("public.input")
    m.put_dataset("public.output")
    m.put_job(io=True)
    run_id = m.create_run()
    m.transition(run_id, "start")
    m.put_source()
    m.put_dataset("public.input")
    # Success refers to the run; a failed run's output update does not (seed 003, unified case).
    m.put_dataset("public.output", run_id=run_id if action == "complete" else None)
    m.put_job(io=True, run_id=run_id)
    m.transition(run_id, action)
    check_outcome(m, run_id, state, version_state)


def test_illegal_transition_is_409_and_changes_nothing(marquez: Marquez) -> None:
    m = marquez
    m.put_namespace()
    m.put_job(io=False)
    run_id = m.create_run()
    answer = m.transition(run_id, "complete", status=409)
    assert answer["code"] == 409 and "NEW" in answer["message"] and "start" in answer["message"]
    assert m.run(run_id)["state"] == "NEW"
    m.transition(run_id, "start")
    assert m.transition(run_id, "start")["state"] == "RUNNING"  # a repeat is a no-op
    m.transition(run_id, "complete")
    assert m.transition(run_id, "complete")["state"] == "COMPLETED"
    assert m.transition(run_id, "fail", status=409)["code"] == 409
    assert m.run(run_id)["state"] == "COMPLETED"


def test_put_dataset_with_unknown_run_is_404_and_creates_nothing(marquez: Marquez) -> None:
    m = marquez
    m.put_namespace()
    m.put_source()
    body = {"type": "DB_TABLE", "physicalName": "x", "sourceName": "warehouse", "runId": str(uuid.uuid4())}
    assert m.call("PUT", f"/namespaces/{m.q}/datasets/x", body, status=404)["code"] == 404
    assert m.call("GET", f"/namespaces/{m.q}/datasets")["totalCount"] == 0
    assert m.call("POST", f"/namespaces/{m.q}/jobs/job/runs", {}, status=404)["code"] == 404
