"""Marquez's own tests of runs, job versions, streaming jobs, the event listing and event
validation, ported to lotline's real server on both databases (issue 20, points 4 to 8).

Each test names the Marquez test it follows (MarquezProject/marquez, ``api/src/test/java/marquez/``);
where SPEC §2/§3 decides otherwise (a run completes only from RUNNING, dataset versions follow
the run's outcome), the port says so and asserts SPEC's answer.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

import pytest
import requests

from api.conftest import ApiServer
from support.ol import run_event


class Rest:
    """Plain HTTP calls on one fresh namespace, each checked for its status."""

    def __init__(self, server: ApiServer, http: requests.Session, ns: str) -> None:
        self.server, self.http, self.ns = server, http, ns
        self.q = quote(ns, safe="")

    def call(self, method: str, path: str, body: Any = None, status: int = 200, **params: Any) -> Any:
        answer = self.http.request(method, self.server.api(path), json=body, params=params, timeout=10)
        assert answer.status_code == status, f"{method} {path}: {answer.status_code} {answer.text}"
        return answer.json() if answer.content else None

    def setup(self, *datasets: str) -> None:
        self.call("PUT", f"/namespaces/{self.q}", {"ownerName": "marquez-tests"})
        self.call("PUT", "/sources/marquez-tests", {"type": "POSTGRESQL", "connectionUrl": "postgres://db"})
        for name in datasets:
            body = {"type": "DB_TABLE", "physicalName": name, "sourceName": "marquez-tests"}
            self.call("PUT", f"/namespaces/{self.q}/datasets/{quote(name, safe='')}", body)

    def put_job(
        self,
        job: str,
        *,
        inputs: tuple[str, ...] = (),
        outputs: tuple[str, ...] = (),
        location: str = "https://github.com/example/jobs/blob/v1/job.py",
        run_id: str | None = None,
        status: int = 200,
    ) -> Any:
        body: dict[str, Any] = {
            "type": "BATCH",
            "inputs": [{"namespace": self.ns, "name": n} for n in inputs],
            "outputs": [{"namespace": self.ns, "name": n} for n in outputs],
            "location": location,
            "description": "a job of Marquez's tests",
        }
        if run_id is not None:
            body["runId"] = run_id
        return self.call("PUT", f"/namespaces/{self.q}/jobs/{quote(job, safe='')}", body, status=status)

    def create_run(self, job: str) -> str:
        run = self.call("POST", f"/namespaces/{self.q}/jobs/{quote(job, safe='')}/runs", {}, status=201)
        return str(run["id"])

    def mark(self, run_id: str, *actions: str) -> Any:
        answer = None
        for action in actions:
            answer = self.call("POST", f"/jobs/runs/{run_id}/{action}")
        return answer

    def run(self, run_id: str) -> Any:
        return self.call("GET", f"/jobs/runs/{run_id}")

    def job(self, job: str, ns: str | None = None) -> Any:
        q = self.q if ns is None else quote(ns, safe="")
        return self.call("GET", f"/namespaces/{q}/jobs/{quote(job, safe='')}")

    def versions(self, job: str) -> list[Any]:
        found: list[Any] = self.call("GET", f"/namespaces/{self.q}/jobs/{quote(job, safe='')}/versions")[
            "versions"
        ]
        return found

    def version(self, job: str, version: str) -> Any:
        return self.call("GET", f"/namespaces/{self.q}/jobs/{quote(job, safe='')}/versions/{version}")

    def lineage(self, node_id: str, depth: int = 5) -> list[Any]:
        found: list[Any] = self.call("GET", "/lineage", nodeId=node_id, depth=depth)["graph"]
        return found

    def post(self, event: Any, status: int = 201) -> Any:
        return self.call("POST", "/lineage", event, status=status)


@pytest.fixture
def rest(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> Rest:
    return Rest(api_server, http, fresh_ns)


# -- point 4: latestRun on job versions and on the graph's job nodes ---------------------------


def test_job_versions_carry_their_latest_run(rest: Rest) -> None:
    """JobResourceIntegrationTest.testApp_listJobVersions (SPEC §2: a run completes from RUNNING,
    so each run is started before Marquez's ``markRunAs(COMPLETED)``)."""
    rest.setup()
    rest.put_job("job")
    first = rest.create_run("job")
    rest.mark(first, "start", "complete")
    (only,) = rest.versions("job")
    assert only["latestRun"]["id"] == first and only["latestRun"]["state"] == "COMPLETED"

    second = rest.create_run("job")
    rest.put_job("job", location="https://github.com/example/jobs/blob/v2/job.py", run_id=second)
    rest.mark(second, "start", "complete")
    newest, older = rest.versions("job")
    assert newest["latestRun"]["id"] == second
    assert newest["latestRun"]["jobVersion"]["version"] == newest["version"]
    assert older["latestRun"]["id"] == first  # each version its own run, not the job's latest


def test_a_job_version_by_id_carries_its_latest_run(rest: Rest) -> None:
    """JobResourceIntegrationTest.testApp_getJobVersion and
    testApp_getJobVersionWithInputsAndOutputs."""
    rest.setup("in", "out")
    rest.put_job("job", inputs=("in",), outputs=("out",))
    assert rest.versions("job")[0]["latestRun"] is None  # no run yet
    run_id = rest.create_run("job")
    rest.mark(run_id, "start", "complete")
    (listed,) = rest.versions("job")
    found = rest.version("job", listed["version"])
    assert found["latestRun"]["id"] == run_id
    assert [d["name"] for d in found["inputs"]] == ["in"] and [d["name"] for d in found["outputs"]] == ["out"]
    assert found["latestRun"]["outputDatasetVersions"][0]["datasetVersionId"]["name"] == "out"


def test_graph_job_nodes_carry_the_latest_run(rest: Rest) -> None:
    """LineageServiceTest.testLineage: the job node's latestRun is the job's second run, the
    same run as the job's own latestRun."""
    ns = rest.ns
    for second in (0, 10):
        run_id = str(uuid.uuid4())
        rest.post(run_event(ns, "writeJob", run_id, "START", second=second, outputs=("common",)))
        rest.post(run_event(ns, "writeJob", run_id, "COMPLETE", second=second + 1, outputs=("common",)))
    reader = str(uuid.uuid4())
    rest.post(run_event(ns, "readJob", reader, "START", second=20, inputs=("common",), outputs=("read",)))
    graph = rest.lineage(f"job:{ns}:writeJob", depth=2)
    jobs = {n["data"]["name"]: n["data"] for n in graph if n["type"] == "JOB"}
    assert jobs["writeJob"]["latestRun"]["id"] == run_id
    assert jobs["writeJob"]["latestRun"]["state"] == "COMPLETED"
    assert jobs["writeJob"]["latestRun"]["inputDatasetVersions"] == []
    assert jobs["writeJob"]["latestRun"] == rest.job("writeJob")["latestRun"]
    # A batch job's version (and so its graph edges) comes with its end: readJob is not drawn yet.
    assert set(jobs) == {"writeJob"}
    datasets = [n for n in graph if n["type"] == "DATASET"]
    assert all("latestRun" not in n["data"] for n in datasets)
