"""Marquez's own tests of facets where Marquez shows them (issue 20, point 3), ported to lotline's
real server on both databases: a dataset version's facets, a dataset's description from its
``documentation`` facet, a stream's ``schemaLocation``. Each names the Marquez test it follows
(MarquezProject/marquez, ``api/src/test/java/marquez/``).
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

import pytest
import requests

from api.conftest import ApiServer
from api.test_marquez_runs_events import Rest
from support.ol import PRODUCER, run_event


@pytest.fixture
def rest(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> Rest:
    return Rest(api_server, http, fresh_ns)


def _facet(**fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": "https://lotline.test/facet", **fields}


def test_a_version_carries_the_facets_of_the_event_that_made_it(rest: Rest) -> None:
    """DatasetIntegrationTest.testApp_getTableVersions: the version's facets are the dataset facets
    of the events that wrote it (Marquez: input and output facets merged), not ``{}``."""
    rest.setup()
    run_id = str(uuid.uuid4())
    output_facets = {
        "schema": _facet(fields=[{"name": "a", "type": "INTEGER"}]),
        "documentation": _facet(description="output documentation"),
        "custom": _facet(outputFacetKey="outputFacetValue"),
    }
    start = run_event(rest.ns, "job", run_id, "START", outputs=("out",))
    complete = run_event(rest.ns, "job", run_id, "COMPLETE", second=1, outputs=("out",))
    complete["outputs"][0]["facets"] = output_facets
    rest.post(start)
    rest.post(complete)
    path = f"/namespaces/{rest.q}/datasets/out/versions"
    (version,) = rest.call("GET", path)["versions"]
    assert {name: version["facets"][name] for name in output_facets} == output_facets
    assert rest.call("GET", f"{path}/{version['version']}")["facets"] == version["facets"]
    # OpenLineageIntegrationTest (the datasets' documentation facets): the description comes from it.
    assert version["description"] == "output documentation"
    assert rest.call("GET", f"/namespaces/{rest.q}/datasets/out")["description"] == "output documentation"


def test_the_latest_version_also_carries_the_facets_of_events_that_read_it(rest: Rest) -> None:
    """DatasetIntegrationTest.testApp_getTableVersions: a read-only job's event lists the dataset as
    an input with one more dataset facet (``inputFacetKey``); the latest version's facets are the
    union of the dataset facets of the events that wrote and read it."""
    rest.setup()
    output_facets = {
        "schema": _facet(fields=[{"name": "firstname", "type": "string", "description": "the first name"}]),
        "documentation": _facet(description="the dataset documentation"),
        "outputFacetKey": "outputFacetValue",
    }
    writer = run_event(rest.ns, "writer", str(uuid.uuid4()), "COMPLETE", outputs=("table",))
    writer["outputs"][0]["facets"] = output_facets
    rest.post(writer)
    reader = run_event(rest.ns, "aReadOnlyJob", str(uuid.uuid4()), "COMPLETE", second=1, inputs=("table",))
    reader["inputs"][0]["facets"] = {**output_facets, "inputFacetKey": "inputFacetValue"}
    rest.post(reader)
    path = f"/namespaces/{rest.q}/datasets/table/versions"
    latest = rest.call("GET", path)["versions"][0]
    expected = {**output_facets, "inputFacetKey": "inputFacetValue"}
    assert {name: latest["facets"].get(name) for name in expected} == expected
    assert latest["createdByRun"]["id"] == writer["run"]["runId"]
    assert rest.call("GET", f"{path}/{latest['version']}")["facets"] == latest["facets"]


def test_a_version_keeps_its_facets_when_later_events_change_the_dataset(rest: Rest) -> None:
    """Each version holds what it was made with: a later run's facets go to the later version."""
    rest.setup()
    for second, value in ((0, "first"), (10, "second")):
        run_id = str(uuid.uuid4())
        rest.post(run_event(rest.ns, "job", run_id, "START", second=second, outputs=("out",)))
        complete = run_event(rest.ns, "job", run_id, "COMPLETE", second=second + 1, outputs=("out",))
        complete["outputs"][0]["facets"] = {"custom": _facet(value=value)}
        rest.post(complete)
    versions = rest.call("GET", f"/namespaces/{rest.q}/datasets/out/versions")["versions"]
    assert [v["facets"]["custom"]["value"] for v in versions] == ["second", "first"]  # newest first


def test_a_stream_keeps_its_schema_location(rest: Rest) -> None:
    """MarquezAppIntegrationTest.testApp_createStream: stored, returned, updatable. (Marquez also
    makes a version for each PUT; SPEC §3 rule 5 makes none without a run.)"""
    rest.setup()
    path = f"/namespaces/{rest.q}/datasets/{quote('events.stream', safe='')}"
    body = {
        "type": "STREAM",
        "physicalName": "events",
        "sourceName": "marquez-tests",
        "schemaLocation": "http://registry.example.com/schemas/events/1",
        "description": "a stream",
    }
    created = rest.call("PUT", path, body)
    assert created["schemaLocation"] == body["schemaLocation"]
    assert rest.call("GET", path)["schemaLocation"] == body["schemaLocation"]
    moved = rest.call("PUT", path, {**body, "schemaLocation": "http://registry.example.com/schemas/events/2"})
    assert moved["schemaLocation"].endswith("/events/2")
    assert moved["description"] == "a stream"
    # A PUT without one keeps it.
    kept = rest.call("PUT", path, {k: v for k, v in body.items() if k != "schemaLocation"})
    assert kept["schemaLocation"].endswith("/events/2")


def test_a_schema_location_on_a_table_is_refused_and_changes_nothing(rest: Rest) -> None:
    rest.setup("table")
    path = f"/namespaces/{rest.q}/datasets/table"
    before = rest.call("GET", path)
    body = {"type": "DB_TABLE", "physicalName": "other", "schemaLocation": "http://registry.example.com/x"}
    refused = rest.call("PUT", path, body, status=400)
    assert "STREAM" in refused["message"]
    assert rest.call("GET", path) == before
    assert "schemaLocation" not in before  # a table has none
