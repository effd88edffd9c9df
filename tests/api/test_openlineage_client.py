"""openlineage-python's HTTP transport against lotline: run lifecycle, parent facet, gzip, api key."""

from __future__ import annotations

import gzip
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
import yaml
from jsonschema import Draft202012Validator
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import parent_run, schema_dataset
from openlineage.client.serde import Serde
from openlineage.client.transport.http import ApiKeyTokenProvider, HttpCompression, HttpConfig, HttpTransport

from api.conftest import AUTH, TOKEN, ApiServer
from support.ol_schema import SCHEMAS

PRODUCER = "https://lotline.test/tests"
T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)


def make_client(server: ApiServer, *, gzip_bodies: bool = False, token: str = TOKEN) -> OpenLineageClient:
    config = HttpConfig(
        url=server.url,
        auth=ApiKeyTokenProvider({"apiKey": token}),
        compression=HttpCompression.GZIP if gzip_bodies else None,
        retry={"total": 0},
    )
    return OpenLineageClient(transport=HttpTransport(config))


def event(
    state: RunState,
    ns: str,
    job: str,
    run_id: str,
    *,
    minutes: int = 0,
    inputs: list[InputDataset] | None = None,
    outputs: list[OutputDataset] | None = None,
    facets: dict[str, Any] | None = None,
) -> RunEvent:
    return RunEvent(
        eventType=state,
        eventTime=(T0 + timedelta(minutes=minutes)).isoformat(),
        run=Run(runId=run_id, facets=facets or {}),
        job=Job(namespace=ns, name=job),
        inputs=inputs or [],
        outputs=outputs or [],
        producer=PRODUCER,
    )


def get_run(server: ApiServer, run_id: str) -> dict[str, Any]:
    answer = requests.get(server.api(f"/jobs/runs/{run_id}"), timeout=10)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def dataset(server: ApiServer, ns: str, name: str) -> dict[str, Any]:
    quote = requests.utils.quote
    answer = requests.get(
        server.api(f"/namespaces/{quote(ns, safe='')}/datasets/{quote(name, safe='')}"), timeout=10
    )
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


@pytest.mark.parametrize("gzip_bodies", [False, True], ids=["plain", "gzip"])
def test_start_running_complete_accumulate(api_server: ApiServer, fresh_ns: str, gzip_bodies: bool) -> None:
    client = make_client(api_server, gzip_bodies=gzip_bodies)
    run_id = str(uuid.uuid4())
    schema = schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name="id", type="BIGINT", description="key")]
    )
    source = InputDataset(namespace=fresh_ns, name="raw/orders:2026", facets={"schema": schema})
    target = OutputDataset(namespace=fresh_ns, name="clean.orders")
    client.emit(event(RunState.START, fresh_ns, "etl", run_id, inputs=[source]))
    client.emit(event(RunState.RUNNING, fresh_ns, "etl", run_id, minutes=1))
    assert get_run(api_server, run_id)["state"] == "RUNNING"
    client.emit(event(RunState.COMPLETE, fresh_ns, "etl", run_id, minutes=2, outputs=[target]))

    run = get_run(api_server, run_id)
    assert (run["state"], run["durationMs"]) == ("COMPLETED", 120_000)
    assert [v["datasetVersionId"]["name"] for v in run["inputDatasetVersions"]] == ["raw/orders:2026"]
    [written] = run["outputDatasetVersions"]
    assert (
        dataset(api_server, fresh_ns, "clean.orders")["currentVersion"]
        == written["datasetVersionId"]["version"]
    )
    fields = dataset(api_server, fresh_ns, "raw/orders:2026")["fields"]
    assert fields == [{"name": "id", "type": "BIGINT", "tags": [], "description": "key"}]
    assert "tags" in run["facets"]  # the client's own run facet is kept


@pytest.mark.parametrize(
    ("state", "expected", "version_state"),
    [(RunState.FAIL, "FAILED", "failed"), (RunState.ABORT, "ABORTED", "failed")],
)
def test_fail_and_abort_version_outputs_without_making_them_current(
    api_server: ApiServer, fresh_ns: str, state: RunState, expected: str, version_state: str
) -> None:
    client = make_client(api_server)
    run_id = str(uuid.uuid4())
    target = OutputDataset(namespace=fresh_ns, name="out")
    client.emit(event(RunState.START, fresh_ns, "job", run_id))
    client.emit(event(state, fresh_ns, "job", run_id, minutes=1, outputs=[target]))
    run = get_run(api_server, run_id)
    assert run["state"] == expected
    assert dataset(api_server, fresh_ns, "out")["currentVersion"] is None
    quote = requests.utils.quote
    versions = requests.get(
        api_server.api(f"/namespaces/{quote(fresh_ns, safe='')}/datasets/out/versions"), timeout=10
    ).json()
    assert [v["state"] for v in versions["versions"]] == [version_state]


def test_late_start_never_reopens_and_repeats_are_idempotent(api_server: ApiServer, fresh_ns: str) -> None:
    client = make_client(api_server)
    run_id = str(uuid.uuid4())
    done = event(
        RunState.COMPLETE,
        fresh_ns,
        "job",
        run_id,
        minutes=5,
        outputs=[OutputDataset(namespace=fresh_ns, name="o")],
    )
    client.emit(event(RunState.START, fresh_ns, "job", run_id))
    client.emit(done)
    client.emit(done)  # the identical event again
    client.emit(event(RunState.START, fresh_ns, "job", run_id, minutes=9))  # late, out of order
    client.emit(event(RunState.FAIL, fresh_ns, "job", run_id, minutes=9))
    run = get_run(api_server, run_id)
    assert (run["state"], len(run["outputDatasetVersions"])) == ("COMPLETED", 1)
    quote = requests.utils.quote
    versions = requests.get(
        api_server.api(f"/namespaces/{quote(fresh_ns, safe='')}/datasets/o/versions"), timeout=10
    )
    assert versions.json()["totalCount"] == 1


def test_parent_facet_links_child_to_parent(api_server: ApiServer, fresh_ns: str) -> None:
    client = make_client(api_server)
    parent_id, child_id = str(uuid.uuid4()), str(uuid.uuid4())
    client.emit(event(RunState.START, fresh_ns, "dag", parent_id))
    facet = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=parent_id), job=parent_run.Job(namespace=fresh_ns, name="dag")
    )
    client.emit(event(RunState.START, fresh_ns, "dag.task", child_id, facets={"parent": facet}))
    child = get_run(api_server, child_id)
    assert child["parentRunId"] == parent_id
    assert child["facets"]["parent"]["run"]["runId"] == parent_id
    # A parent not seen yet is created, so the link is never lost.
    orphan, unknown_parent = str(uuid.uuid4()), str(uuid.uuid4())
    facet = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=unknown_parent), job=parent_run.Job(namespace=fresh_ns, name="other-dag")
    )
    client.emit(event(RunState.START, fresh_ns, "t2", orphan, facets={"parent": facet}))
    assert get_run(api_server, orphan)["parentRunId"] == unknown_parent
    # Started by the child's START, as Marquez records it (docs/api.md "Behaviour").
    placeholder = get_run(api_server, unknown_parent)
    assert (placeholder["state"], placeholder["startedAt"]) == ("RUNNING", "2026-01-01T12:00:00Z")


def test_wrong_api_key_is_refused(api_server: ApiServer, fresh_ns: str) -> None:
    client = make_client(api_server, token="wrong")
    with pytest.raises(Exception, match="401"):
        client.emit(event(RunState.START, fresh_ns, "job", str(uuid.uuid4())))


def raw_event(ns: str, run_id: str, event_type: str = "START", **extra: Any) -> dict[str, Any]:
    return {
        "eventType": event_type,
        "eventTime": "2026-01-01T00:00:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id, "facets": {"custom": {"_producer": "x", "_schemaURL": "y", "deep": [1, 2]}}},
        "job": {"namespace": ns, "name": "job"},
        **extra,
    }


def test_non_uuid_run_ids_map_deterministically_and_unknown_fields_are_kept(
    api_server: ApiServer, http: requests.Session, fresh_ns: str
) -> None:
    body = raw_event(fresh_ns, "airflow-run-42", futureField={"anything": True})
    assert http.post(api_server.api("/lineage"), json=body, timeout=10).status_code == 201
    mapped = str(uuid.uuid3(uuid.NAMESPACE_URL, "airflow-run-42"))
    run = get_run(api_server, mapped)
    assert run["facets"]["custom"]["deep"] == [1, 2]
    stored = http.get(api_server.api("/events/lineage"), params={"limit": 1000}, timeout=10).json()["events"]
    assert any(
        e.get("futureField") == {"anything": True} and e["job"]["namespace"] == fresh_ns for e in stored
    )


def test_gzip_body_sent_by_hand(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> None:
    body = gzip.compress(json.dumps(raw_event(fresh_ns, str(uuid.uuid4()))).encode())
    headers = {**AUTH, "Content-Type": "application/json", "Content-Encoding": "gzip"}
    assert (
        requests.post(api_server.api("/lineage"), data=body, headers=headers, timeout=10).status_code == 201
    )
    bad = requests.post(api_server.api("/lineage"), data=b"not gzip", headers=headers, timeout=10)
    assert (bad.status_code, bad.json()["code"]) == (400, 400)


def test_dataset_and_job_events(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> None:
    dataset_event = {
        "eventTime": "2026-01-01T00:00:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {
            "namespace": fresh_ns,
            "name": "static",
            "facets": {
                "schema": {"_producer": "x", "_schemaURL": "y", "fields": [{"name": "a", "type": "INT"}]}
            },
        },
    }
    job_event = {
        "eventTime": "2026-01-01T00:00:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": fresh_ns, "name": "declared"},
        "inputs": [{"namespace": fresh_ns, "name": "static"}],
        "outputs": [{"namespace": fresh_ns, "name": "derived"}],
    }
    for body in (dataset_event, job_event):
        assert http.post(api_server.api("/lineage"), json=body, timeout=10).status_code == 201
    static = dataset(api_server, fresh_ns, "static")
    assert ([f["name"] for f in static["fields"]], static["currentVersion"]) == (["a"], None)
    quote = requests.utils.quote
    job = http.get(api_server.api(f"/namespaces/{quote(fresh_ns, safe='')}/jobs/declared"), timeout=10).json()
    assert (job["inputs"], job["outputs"]) == (
        [{"namespace": fresh_ns, "name": "static"}],
        [{"namespace": fresh_ns, "name": "derived"}],
    )


def test_batch_partial_success(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> None:
    good = raw_event(fresh_ns, str(uuid.uuid4()))
    bad = {**raw_event(fresh_ns, str(uuid.uuid4())), "eventTime": "yesterday"}
    answer = http.post(api_server.api("/lineage/batch"), json=[good, bad, "nope"], timeout=10)
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "partial_success"
    assert body["summary"] == {
        "received": 3,
        "successful": 1,
        "failed": 2,
        "retriable": 0,
        "non_retriable": 2,
    }
    assert [f["index"] for f in body["failed_events"]] == [1, 2]
    assert get_run(api_server, good["run"]["runId"])["state"] == "RUNNING"
    missing = http.get(api_server.api(f"/jobs/runs/{bad['run']['runId']}"), timeout=10)
    assert missing.status_code == 404  # the failed event changed nothing


def _batch_answer_schema() -> dict[str, Any]:
    """The spec's answer to a batch (``OpenLineage.yml``, vendored with the JSON schemas)."""
    spec = yaml.safe_load((SCHEMAS / "OpenLineage.yml").read_text())
    answer: dict[str, Any] = spec["paths"]["/lineage/batch"]["post"]["responses"]["200"]
    return answer["content"]["application/json"]["schema"]  # type: ignore[no-any-return]


def test_batch_answers_in_the_spec_shape(
    api_server: ApiServer, http: requests.Session, fresh_ns: str
) -> None:
    """Events serialized by openlineage-python (its ``Serde``, as its transports send them), a
    repeat, and refused ones; the answer validates against the spec's response schema, also when
    every event is refused (``partial_success``: the spec has no other status for it)."""
    run_id = str(uuid.uuid4())
    events = [
        Serde.to_dict(event(state, fresh_ns, "batched", run_id, minutes=i))
        for i, state in enumerate((RunState.START, RunState.COMPLETE))
    ]
    bad = {**events[0], "eventTime": "yesterday"}
    body = [events[0], events[1], events[0], bad]
    validator = Draft202012Validator(_batch_answer_schema())
    answer = http.post(api_server.api("/lineage/batch"), json=body, timeout=10)
    assert answer.status_code == 200
    assert list(validator.iter_errors(answer.json())) == []
    assert answer.json()["status"] == "partial_success"
    assert answer.json()["summary"] == {
        "received": 4,
        "successful": 3,  # the repeat is journaled once, and succeeds
        "failed": 1,
        "retriable": 0,
        "non_retriable": 1,
    }
    (failed,) = answer.json()["failed_events"]
    assert (failed["index"], failed["retriable"]) == (3, False) and "eventTime" in failed["reason"]
    assert get_run(api_server, run_id)["state"] == "COMPLETED"

    everything_refused = http.post(api_server.api("/lineage/batch"), json=[bad, "nope"], timeout=10)
    assert everything_refused.status_code == 200
    assert list(validator.iter_errors(everything_refused.json())) == []
    assert everything_refused.json()["status"] == "partial_success"
    assert everything_refused.json()["summary"]["successful"] == 0

    fine = http.post(api_server.api("/lineage/batch"), json=events, timeout=10).json()
    assert list(validator.iter_errors(fine)) == []
    assert (fine["status"], fine["summary"]["successful"], fine["failed_events"]) == ("success", 2, [])


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"{not json", 400),
        (b"[]", 400),
        # Well-formed JSON of the wrong shape is a 422, as in Marquez (issue 20, point 7).
        (json.dumps({"eventTime": "2026-01-01T00:00:00Z"}).encode(), 422),
        (json.dumps({**raw_event("ns", "r"), "eventType": "EXPLODE"}).encode(), 422),
        (json.dumps({**raw_event("ns", "r"), "eventTime": "2026-01-01"}).encode(), 400),
        (json.dumps({**raw_event("ns", "r"), "job": {"namespace": "ns", "name": "../escape"}}).encode(), 400),
        # "\ud800": half of a surrogate pair, valid JSON escaping but no Unicode text (was a 500).
        (json.dumps({**raw_event("ns", "r"), "producer": "half \ud800 pair"}).encode(), 400),
    ],
    ids=[
        "malformed",
        "array",
        "no-run-or-job",
        "bad-type",
        "date-without-time",
        "escaping-name",
        "unpaired-surrogate",
    ],
)
def test_bad_events_are_refused_and_change_nothing(
    api_server: ApiServer, http: requests.Session, body: bytes, status: int
) -> None:
    before = http.get(api_server.api("/events/lineage"), params={"limit": 1}, timeout=10).json()["totalCount"]
    answer = http.post(
        api_server.api("/lineage"), data=body, headers={"Content-Type": "application/json"}, timeout=10
    )
    assert answer.status_code == status, answer.text
    assert answer.json()["code"] == status
    assert set(answer.json()) == {"code", "message"}
    after = http.get(api_server.api("/events/lineage"), params={"limit": 1}, timeout=10).json()["totalCount"]
    assert after == before
