"""Marquez's own Python client, unchanged, against lotline on SQLite and PostgreSQL.

Every client method except ``list_events`` is called; names contain ``/`` and ``:``.
"""

from __future__ import annotations

import uuid
import warnings

import pytest
import requests
from marquez_client import MarquezClient
from marquez_client.errors import APIError
from marquez_client.models import DatasetId, DatasetType, JobType

from api.conftest import TOKEN, ApiServer

DATASET = "s3://bucket/warehouse/orders:v1"
OUTPUT = "db.schema/daily:orders"


@pytest.fixture
def client(api_server: ApiServer) -> MarquezClient:
    warnings.simplefilter("ignore", DeprecationWarning)  # Marquez deprecated its REST writers
    return MarquezClient(url=api_server.url, api_key=TOKEN)


def test_namespaces_and_sources(client: MarquezClient, fresh_ns: str) -> None:
    created = client.create_namespace(fresh_ns, "owner", "with : and /")
    assert (created["name"], created["ownerName"], created["description"]) == (
        fresh_ns,
        "owner",
        "with : and /",
    )
    assert client.get_namespace(fresh_ns)["name"] == fresh_ns
    assert fresh_ns in [n["name"] for n in client.list_namespaces(limit=1000)["namespaces"]]

    source = f"s3://source-{uuid.uuid4().hex[:6]}"
    made = client.create_source(source, "s3", "s3://bucket", "objects")
    assert (made["name"], made["type"], made["connectionUrl"]) == (source, "S3", "s3://bucket")
    assert client.get_source(source)["description"] == "objects"
    assert source in [s["name"] for s in client.list_sources(limit=1000)["sources"]]
    with pytest.raises(APIError):
        client.get_namespace(fresh_ns + "-missing")


def test_datasets_fields_and_tags(client: MarquezClient, fresh_ns: str) -> None:
    client.create_namespace(fresh_ns, "owner")
    client.create_source("fs", "local", "file:///data")
    fields = [{"name": "id", "type": "INT"}, {"name": "email", "type": "STRING", "description": "contact"}]
    made = client.create_dataset(
        fresh_ns, DATASET, DatasetType.DB_TABLE, "orders", "fs", description="orders", fields=fields
    )
    assert made["id"] == {"namespace": fresh_ns, "name": DATASET}
    assert [f["name"] for f in made["fields"]] == ["id", "email"]
    assert made["currentVersion"] is None  # declared, never written (SPEC §3 rule 1/5)

    tagged = client.tag_dataset(fresh_ns, DATASET, "gold")
    assert tagged["tags"] == ["gold"]
    field_tagged = client.tag_dataset_field(fresh_ns, DATASET, "email", "PII")
    assert {f["name"]: f["tags"] for f in field_tagged["fields"]} == {"id": [], "email": ["PII"]}
    assert client.get_dataset(fresh_ns, DATASET)["tags"] == ["gold"]
    page = client.list_datasets(fresh_ns)
    assert (page["totalCount"], page["datasets"][0]["name"]) == (1, DATASET)
    assert client.list_dataset_versions(fresh_ns, DATASET) == {"versions": [], "totalCount": 0}

    created_tag = client.create_tag(f"tier-{fresh_ns[-12:]}", "a tier")
    assert created_tag["description"] == "a tier"
    names = [t["name"] for t in client.list_tags(limit=1000)["tags"]]
    assert {"gold", "PII", created_tag["name"]} <= set(names)


def test_job_run_lifecycle_versions_outputs(client: MarquezClient, fresh_ns: str) -> None:
    client.create_namespace(fresh_ns, "owner")
    client.create_source("fs", "local", "file:///data")
    for name in (DATASET, OUTPUT):
        client.create_dataset(fresh_ns, name, DatasetType.DB_TABLE, name, "fs")
    job = client.create_job(
        fresh_ns,
        "etl/daily:orders",
        JobType.BATCH,
        location="git://repo@1",
        inputs=[DatasetId(fresh_ns, DATASET)],
        outputs=[DatasetId(fresh_ns, OUTPUT)],
        description="daily",
    )
    # MarquezAppIntegrationTest.testApp_createJobAndMarkRunAsComplete: the PUT answers the
    # declared inputs, no outputs and no latestRun before a run; reads show the declaration.
    assert job["inputs"] == [{"namespace": fresh_ns, "name": DATASET}]
    assert (job["outputs"], job["latestRun"]) == ([], None)
    declared = client.get_job(fresh_ns, "etl/daily:orders")
    assert declared["outputs"] == [{"namespace": fresh_ns, "name": OUTPUT}]
    assert declared["location"] == "git://repo@1"
    assert client.list_jobs(fresh_ns)["totalCount"] == 1

    run_id = str(uuid.uuid4())
    run = client.create_job_run(
        fresh_ns, "etl/daily:orders", run_id=run_id, run_args={"day": "2026-01-01"}, mark_as_running=True
    )
    assert (run["id"], run["state"], run["args"]) == (run_id, "RUNNING", {"day": "2026-01-01"})
    [pinned] = run["inputDatasetVersions"]
    assert pinned["datasetVersionId"]["name"] == DATASET  # rule 1: the input got V1 at start

    done = client.mark_job_run_as_completed(run_id)
    assert done["state"] == "COMPLETED" and done["durationMs"] >= 0 and done["endedAt"]
    [written] = done["outputDatasetVersions"]
    version = written["datasetVersionId"]["version"]
    fetched = client.get_job_run(run_id)
    assert fetched["jobVersion"]["name"] == "etl/daily:orders"
    assert client.list_job_runs(fresh_ns, "etl/daily:orders")["runs"][0]["id"] == run_id

    output = client.get_dataset(fresh_ns, OUTPUT)
    assert output["currentVersion"] == version
    versions = client.list_dataset_versions(fresh_ns, OUTPUT)
    assert versions["totalCount"] == 1
    got = client.get_dataset_version(fresh_ns, OUTPUT, version)
    assert (got["version"], got["state"], got["createdByRun"]["id"]) == (version, "current", run_id)

    failing = client.create_job_run(fresh_ns, "etl/daily:orders")
    client.mark_job_run_as_started(failing["id"])
    failed = client.mark_job_run_as_failed(failing["id"])
    assert failed["state"] == "FAILED"
    assert client.get_dataset(fresh_ns, OUTPUT)["currentVersion"] == version  # rule 4
    aborted = client.create_job_run(fresh_ns, "etl/daily:orders")
    assert client.mark_job_run_as_aborted(aborted["id"])["state"] == "ABORTED"
    with pytest.raises(APIError):
        client.mark_job_run_as_started(aborted["id"])  # 409: terminal states are final


def test_column_lineage_methods(client: MarquezClient, fresh_ns: str) -> None:
    client.create_namespace(fresh_ns, "owner")
    client.create_source("fs", "local", "file:///data")
    client.create_dataset(
        fresh_ns, DATASET, DatasetType.DB_TABLE, "t", "fs", fields=[{"name": "a", "type": "INT"}]
    )
    client.create_job(fresh_ns, "job", JobType.BATCH, inputs=[DatasetId(fresh_ns, DATASET)])
    by_dataset = client.get_column_lineage_by_dataset(fresh_ns, DATASET)
    assert [n["id"] for n in by_dataset["graph"]] == [f"datasetField:{fresh_ns}:{DATASET}:a"]
    by_field = client.get_column_lineage_by_dataset_field(fresh_ns, DATASET, "a")
    assert by_field["graph"] == by_dataset["graph"]
    assert client.get_column_lineage_by_job(fresh_ns, "job") == {"graph": []}


def test_errors_carry_code_and_message(api_server: ApiServer, fresh_ns: str) -> None:
    answer = requests.get(
        api_server.api(f"/namespaces/{requests.utils.quote(fresh_ns, safe='')}"), timeout=10
    )
    assert answer.status_code == 404
    assert answer.json() == {"code": 404, "message": f"Namespace '{fresh_ns}' not found."}
