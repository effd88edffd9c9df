"""Marquez's own tests of runs, job versions, streaming jobs, the event listing and event
validation, ported to lotline's real server on both databases (issue 20, points 4 to 8).

Each test names the Marquez test it follows (MarquezProject/marquez, ``api/src/test/java/marquez/``);
where SPEC §2/§3 decides otherwise (a run completes only from RUNNING, dataset versions follow
the run's outcome), the port says so and asserts SPEC's answer.
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

import pytest
import requests

from api.conftest import ApiServer
from support.ol import PRODUCER, run_event


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


# -- point 5: streaming jobs get their version while they run ----------------------------------


def _streaming(event: dict[str, Any]) -> dict[str, Any]:
    job_type = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/2-0-3/JobTypeJobFacet.json",
        "processingType": "STREAMING",
        "integration": "FLINK",
        "jobType": "JOB",
    }
    return {**event, "job": {**event["job"], "facets": {"jobType": job_type}}}


def test_a_running_streaming_job_has_its_version_and_links(rest: Rest) -> None:
    """OpenLineageServiceIntegrationTest.testStreamingJob. SPEC §3 differs on the output: the
    run's version of it is written and made current when the run COMPLETES (Marquez writes it at
    the RUNNING event)."""
    ns, run_id = rest.ns, str(uuid.uuid4())
    running = _streaming(
        run_event(ns, "streaming_job_name", run_id, "RUNNING", inputs=("ds",), outputs=("ds",))
    )
    rest.post(running)
    job = rest.job("streaming_job_name")
    assert job["type"] == "STREAM" and job["currentVersion"] is not None
    assert [d["name"] for d in job["inputs"]] == ["ds"] and [d["name"] for d in job["outputs"]] == ["ds"]
    assert job["latestRun"]["state"] == "RUNNING"
    assert job["latestRun"]["jobVersion"]["version"] == job["currentVersion"]
    # ds is read, so it has a current version (SPEC §3 rule 1: V1, no producing run); the run's
    # own write waits for the run's outcome.
    (read,) = rest.call("GET", f"/namespaces/{rest.q}/datasets/ds/versions")["versions"]
    assert (read["versionNumber"], read["createdByRun"]) == (1, None)

    complete = _streaming(run_event(ns, "streaming_job_name", run_id, "COMPLETE", second=5))
    rest.post(complete)
    after = rest.job("streaming_job_name")
    assert after["currentVersion"] == job["currentVersion"]  # the same version, not a new one
    assert len(rest.versions("streaming_job_name")) == 1
    assert after["latestRun"]["state"] == "COMPLETED"
    written, _ = rest.call("GET", f"/namespaces/{rest.q}/datasets/ds/versions")["versions"]
    assert (written["versionNumber"], written["createdByRun"]["id"]) == (2, run_id)
    assert rest.call("GET", f"/namespaces/{rest.q}/datasets/ds")["currentVersion"] == written["version"]


def test_streaming_events_add_a_version_only_for_new_datasets(rest: Rest) -> None:
    """OpenLineageServiceIntegrationTest.testStreamingJobCreateSingleJobAndDatasetVersion."""
    ns, run_id = rest.ns, str(uuid.uuid4())
    event = _streaming(run_event(ns, "streaming_job_name", run_id, "RUNNING", outputs=("ds",)))
    rest.post(event)
    assert len(rest.versions("streaming_job_name")) == 1
    rest.post({**event, "eventTime": "2026-01-01T00:00:01Z"})  # another RUNNING event
    rest.post({**event, "eventTime": "2026-01-01T00:00:02Z", "outputs": []})  # no datasets
    assert len(rest.versions("streaming_job_name")) == 1
    other = {**event, "eventTime": "2026-01-01T00:00:03Z", "inputs": [{"namespace": ns, "name": "other"}]}
    rest.post(other)
    versions = rest.versions("streaming_job_name")
    assert len(versions) == 2
    assert [d["name"] for d in versions[0]["inputs"]] == ["other"]
    assert [d["name"] for d in versions[0]["outputs"]] == ["ds"]  # what the run reported so far
    assert versions[0]["latestRun"]["id"] == run_id
    # The dataset's versions still wait for the run's outcome (SPEC §3).
    assert rest.call("GET", f"/namespaces/{rest.q}/datasets/ds/versions")["versions"] == []


def test_lineage_through_a_running_streaming_job(rest: Rest) -> None:
    """LineageServiceTest.testGetLineageForRunningStreamingJob."""
    ns = rest.ns
    rest.post(run_event(ns, "someInputBatchJob", str(uuid.uuid4()), "COMPLETE", outputs=("input-dataset",)))
    streaming = run_event(
        ns,
        "streamingjob",
        str(uuid.uuid4()),
        "RUNNING",
        inputs=("input-dataset",),
        outputs=("output-dataset",),
    )
    rest.post(_streaming(streaming))
    reader = run_event(ns, "someOutputBatchJob", str(uuid.uuid4()), "COMPLETE", inputs=("output-dataset",))
    rest.post(reader)
    from_input = rest.lineage(f"dataset:{ns}:input-dataset")
    from_output = rest.lineage(f"dataset:{ns}:output-dataset")
    assert len(from_input) == 5  # 2 datasets + 3 jobs
    assert from_input == from_output
    node = next(n for n in from_input if n["id"] == f"job:{ns}:streamingjob")
    assert node["inEdges"] == [{"origin": f"dataset:{ns}:input-dataset", "destination": node["id"]}]
    assert node["outEdges"] == [{"origin": node["id"], "destination": f"dataset:{ns}:output-dataset"}]
    assert node["data"]["latestRun"]["state"] == "RUNNING"


def test_lineage_of_a_completed_streaming_job(rest: Rest) -> None:
    """LineageServiceTest.testGetLineageForCompleteStreamingJob: the COMPLETE event without
    datasets keeps the links the RUNNING event made."""
    ns, run_id = rest.ns, str(uuid.uuid4())
    running = run_event(
        ns, "streamingjob", run_id, "RUNNING", inputs=("input-dataset",), outputs=("output-dataset",)
    )
    rest.post(_streaming(running))
    rest.post(_streaming(run_event(ns, "streamingjob", run_id, "COMPLETE", second=1)))
    assert len(rest.lineage(f"dataset:{ns}:output-dataset")) == 3  # 1 job + 2 datasets


def test_a_running_batch_job_is_not_linked_before_it_ends(rest: Rest) -> None:
    """The other side of LineageServiceTest.testGetLineageForRunningStreamingJob: a batch job's
    version comes with its end, as in Marquez."""
    ns = rest.ns
    rest.post(run_event(ns, "batch", str(uuid.uuid4()), "RUNNING", inputs=("in",), outputs=("out",)))
    assert rest.job("batch")["currentVersion"] is None
    assert len(rest.lineage(f"dataset:{ns}:in")) == 1


# -- point 6: GET /events/lineage: RunEvents only, sortDirection -------------------------------


def _listed(rest: Rest, ns: str, **params: Any) -> tuple[list[Any], int]:
    """The listed events of one namespace's jobs (other tests share the server), and totalCount."""
    found = rest.call("GET", "/events/lineage", limit=1000, **params)
    return [e for e in found["events"] if (e.get("job") or {}).get("namespace") == ns], found["totalCount"]


def test_events_sorted_by_time_both_ways(rest: Rest) -> None:
    """OpenLineageIntegrationTest.testFindEventIsSortedByTime (and the default, newest first)."""
    ns, run_id = rest.ns, str(uuid.uuid4())
    first = {**run_event(ns, "job", run_id, "START", outputs=("table",)), "eventTime": "1987-03-01T10:00:00Z"}
    second = {**first, "eventType": "COMPLETE", "eventTime": "1987-03-01T10:00:10Z"}
    for event in (first, second):
        rest.post(event)
    window = {"after": "1987-03-01T00:00:00Z", "before": "1987-03-02T00:00:00Z"}
    assert _listed(rest, ns, sortDirection="asc", **window)[0] == [first, second]  # as sent
    assert _listed(rest, ns, sortDirection="desc", **window)[0] == [second, first]
    assert _listed(rest, ns, **window)[0] == [second, first]  # desc by default, as in Marquez
    assert _listed(rest, ns, sortDirection="ASC", **window)[0] == [first, second]  # any case


def test_events_between_two_times(rest: Rest) -> None:
    """OpenLineageIntegrationTest.testFindEventBeforeAfterTime."""
    ns, run_id = rest.ns, str(uuid.uuid4())
    first = {**run_event(ns, "job", run_id, "START"), "eventTime": "2020-01-01T00:00:00Z"}
    second = {**first, "eventType": "COMPLETE", "eventTime": "2021-01-01T00:00:10Z"}
    for event in (first, second):
        rest.post(event)
    window = {"after": "2021-01-01T00:00:00Z", "before": "2022-01-01T00:00:00Z"}
    assert _listed(rest, ns, sortDirection="asc", **window)[0] == [second]


@pytest.mark.parametrize("direction", ["asdf", "", "up", "descending"])
def test_a_bad_sort_direction_is_400(rest: Rest, direction: str) -> None:
    """OpenLineageResourceTest.testGetLineageEventsBadSort."""
    answer = rest.call("GET", "/events/lineage", status=400, sortDirection=direction)
    assert answer["code"] == 400 and "sortDirection" in answer["message"]


def test_only_run_events_are_listed(rest: Rest, api_server: ApiServer) -> None:
    """Marquez's OpenLineageDao.getAllLineageEventsDesc/Asc list ``_event_type = 'RUN_EVENT'`` only.
    DatasetEvents and JobEvents stay retrievable (SPEC §6) on the web UI's events page."""
    ns, run_id = rest.ns, str(uuid.uuid4())
    at = "1988-06-01T00:00:0{}Z"
    run = {**run_event(ns, "job", run_id, "START"), "eventTime": at.format(1)}
    job = {
        "eventTime": at.format(2),
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": ns, "name": "declared"},
        "inputs": [{"namespace": ns, "name": "in"}],
    }
    dataset = {
        "eventTime": at.format(3),
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": ns, "name": "in"},
    }
    for event in (run, job, dataset):
        rest.post(event)
    window = {"after": at.format(0), "before": at.format(9)}
    found = rest.call("GET", "/events/lineage", limit=1000, **window)
    mine = [e for e in found["events"] if ns in str(e)]
    assert mine == [run]
    assert found["totalCount"] == len(found["events"])  # counts what is listed (Marquez counts all)
    page = requests.get(f"{api_server.url}/events", params=window, timeout=10)
    assert page.status_code == 200
    assert page.text.count("declared") >= 1 and page.text.count("DatasetEvent") == 1


# -- point 7: validation status codes; a time without a zone is UTC ---------------------------

_RUN_ID = "dae0d60a-6010-4c37-980e-c5270f5a6be4"
_INPUT = {"facets": {}, "name": "OPEN_LINEAGE_DEMO.DEMO.SOURCE_TABLE_1", "namespace": "NS"}
_JOB = {"facets": {}, "name": "testing_name_1", "namespace": "NS"}


def _marquez_event(**changes: Any) -> dict[str, Any]:
    """The event of OpenLineageIntegrationTest.testSendOpenLineageEventFailsValidation, whose
    eventTime has no zone; ``NS`` is replaced by the test's namespace."""
    event = {
        "eventTime": "2021-11-03T10:53:52.427343",
        "eventType": "COMPLETE",
        "inputs": [_INPUT],
        "job": _JOB,
        "outputs": [],
        "producer": "me",
        "run": {"facets": {}, "runId": _RUN_ID},
    }
    return {**event, **changes}


_SCHEMA = {
    "_producer": "https://github.com/OpenLineage/OpenLineage/blob/v1-0-0/client",
    "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/DataQualityAssertionsDatasetFacet.json",
    "fields": [{"assertion": "a", "success": True}],
}
_PARENT = {
    "_producer": "me",
    "_schemaURL": "https://me",
    "run": {},
    "job": {"namespace": "my-scheduler-namespace", "name": "myjob.mytask"},
}
VIOLATIONS = {
    "input-without-name": _marquez_event(inputs=[{"facets": {}, "name": None, "namespace": "NS"}]),
    "schema-field-without-name": _marquez_event(outputs=[{**_INPUT, "facets": {"schema": _SCHEMA}}]),
    "job-without-name": _marquez_event(job={**_JOB, "name": None}),
    "run-without-id": _marquez_event(run={"facets": {}, "runId": None}),
    "parent-with-empty-run": _marquez_event(run={"facets": {"parent": _PARENT}, "runId": _RUN_ID}),
    # lotline's own, of the same kind
    "no-event-time": {k: v for k, v in _marquez_event().items() if k != "eventTime"},
    "null-producer": _marquez_event(producer=None),
    "schema-url-not-a-string": _marquez_event(schemaURL={"url": "https://openlineage.io"}),
    "inputs-not-an-array": _marquez_event(inputs={"name": "x"}),
}


def _in(ns: str, event: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(event).replace('"NS"', json.dumps(ns))
    found: dict[str, Any] = json.loads(text)
    return found


@pytest.mark.parametrize("name", list(VIOLATIONS))
def test_schema_violations_are_422_and_change_nothing(rest: Rest, name: str) -> None:
    """OpenLineageIntegrationTest.testSendOpenLineageEventFailsValidation."""
    answer = rest.post(_in(rest.ns, VIOLATIONS[name]), status=422)
    assert answer["code"] == 422 and answer["message"]
    rest.call("GET", f"/namespaces/{rest.q}", status=404)  # nothing was created
    rest.call("GET", f"/jobs/runs/{_RUN_ID}", status=404)


def test_a_date_without_a_time_is_400(rest: Rest) -> None:
    """OpenLineageIntegrationTest.testSendOpenLineageEventFailsJsonProcessing: malformed values
    stay 400, as does malformed JSON."""
    answer = rest.post(_in(rest.ns, _marquez_event(eventTime="2021-11-03")), status=400)
    assert "2021-11-03" in answer["message"] and "eventTime" in answer["message"]
    json_type = {"Content-Type": "application/json"}
    url = rest.server.api("/lineage")
    malformed = rest.http.post(url, data=b'{"eventTime": ', headers=json_type, timeout=10)
    assert (malformed.status_code, malformed.json()["code"]) == (400, 400)


def test_a_time_without_a_zone_is_utc(rest: Rest) -> None:
    """Marquez reads the zoneless eventTime of its validation tests' events as UTC; so does lotline
    (also a nominal time)."""
    run_id = str(uuid.uuid4())
    nominal = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/NominalTimeRunFacet.json",
        "nominalStartTime": "2021-11-03T10:00:00",
    }
    start = _marquez_event(eventType="START", run={"facets": {"nominalTime": nominal}, "runId": run_id})
    rest.post(_in(rest.ns, start))
    rest.post(_in(rest.ns, {**start, "eventType": "COMPLETE", "eventTime": "2021-11-03T12:53:52+01:00"}))
    run = rest.run(run_id)
    assert run["state"] == "COMPLETED"
    assert (run["startedAt"], run["endedAt"]) == ("2021-11-03T10:53:52.427343Z", "2021-11-03T11:53:52Z")
    assert run["nominalStartTime"] == "2021-11-03T10:00:00Z"


def test_a_batch_lists_each_refused_event(rest: Rest) -> None:
    """A batch answers 200 with the summary; each bad event is listed with its reason, whether it
    is malformed (400 alone) or breaks the schema (422 alone), and the others go on."""
    good = run_event(rest.ns, "job", str(uuid.uuid4()), "START")
    bad_time = {**good, "eventTime": "2021-11-03"}
    no_job_name = {**good, "job": {"namespace": rest.ns, "name": None}}
    answer = rest.call("POST", "/lineage/batch", [good, bad_time, no_job_name])
    assert answer["status"] == "partial_success" and answer["summary"]["failed"] == 2
    reasons = {f["index"]: f["reason"] for f in answer["failed_events"]}
    assert "eventTime" in reasons[1] and "job.name" in reasons[2]
    assert rest.run(good["run"]["runId"])["state"] == "RUNNING"


# -- point 8: a job PUT naming a run that has ended ---------------------------------------------

DATASET = "test-same-io-dataset"


def _versions_differ(run: Any) -> None:
    """FlowIntegrationTest.assertInputDatasetVersionDiffersFromOutput."""
    read = [v["datasetVersionId"] for v in run["inputDatasetVersions"]]
    written = [v["datasetVersionId"] for v in run["outputDatasetVersions"]]
    assert read and written
    assert all(v["name"] == DATASET for v in read + written)
    assert not {v["version"] for v in read} & {v["version"] for v in written}


def test_an_unchanged_job_put_after_the_run_ended_is_accepted(rest: Rest) -> None:
    """FlowIntegrationTest.testSameInputAndOutputDatasetWithJobRunIdUpdatedAtTheEnd: the run
    read and wrote what the job declares, so repeating the declaration with its runId is a 200
    that changes nothing."""
    rest.setup(DATASET)
    rest.put_job("job", inputs=(DATASET,), outputs=(DATASET,))
    run_id = rest.create_run("job")
    rest.mark(run_id, "start", "complete")
    before = (
        rest.run(run_id),
        rest.job("job"),
        rest.call("GET", f"/namespaces/{rest.q}/datasets/{DATASET}/versions"),
    )
    answer = rest.put_job("job", inputs=(DATASET,), outputs=(DATASET,), run_id=run_id)
    assert answer["latestRun"] == before[0]
    after = (
        rest.run(run_id),
        rest.job("job"),
        rest.call("GET", f"/namespaces/{rest.q}/datasets/{DATASET}/versions"),
    )
    assert after[0] == before[0] and after[2] == before[2]
    assert after[1]["currentVersion"] == before[1]["currentVersion"]
    _versions_differ(after[0])


@pytest.mark.parametrize("change", ["new-output", "new-input", "new-location"])
def test_a_changed_job_put_after_the_run_ended_is_409_and_changes_nothing(rest: Rest, change: str) -> None:
    """SPEC §3 ("reported after the run ended"): what a run read and wrote must be known when its
    outcome resolves its versions, so a declaration that adds to it is refused."""
    rest.setup(DATASET, "other")
    rest.put_job("job", inputs=(DATASET,), outputs=(DATASET,))
    run_id = rest.create_run("job")
    rest.mark(run_id, "start", "complete")
    before = rest.run(run_id), rest.job("job"), rest.versions("job")
    changed: dict[str, Any] = {"inputs": (DATASET,), "outputs": (DATASET,)}
    if change == "new-output":
        changed["outputs"] = (DATASET, "other")
    elif change == "new-input":
        changed["inputs"] = (DATASET, "other")
    else:
        changed["location"] = "https://github.com/example/jobs/blob/v2/job.py"
    answer = rest.put_job("job", run_id=run_id, status=409, **changed)
    assert (
        answer["code"] == 409 and "COMPLETED" in answer["message"] and "before it ends" in answer["message"]
    )
    assert (rest.run(run_id), rest.job("job"), rest.versions("job")) == before
    assert rest.call("GET", f"/namespaces/{rest.q}/datasets/other/versions")["versions"] == []


def test_a_job_put_while_running_links_the_run(rest: Rest) -> None:
    """FlowIntegrationTest.testSameInputAndOutputDatasetWithJobRunIdUpdated and
    testOutputVersionShouldBeOnlyOneCreatedViaJobAndDatasetApi."""
    rest.setup(DATASET)
    rest.put_job("job")
    run_id = rest.create_run("job")
    rest.mark(run_id, "start")
    rest.put_job("job", inputs=(DATASET,), outputs=(DATASET,), run_id=run_id)
    body = {"type": "DB_TABLE", "physicalName": DATASET, "sourceName": "marquez-tests", "runId": run_id}
    rest.call("PUT", f"/namespaces/{rest.q}/datasets/{DATASET}", body)
    run = rest.mark(run_id, "complete")
    assert len(run["outputDatasetVersions"]) == 1
    _versions_differ(run)
