"""Column lineage of producers lotline did not write (issue 42, points 1 and 3), on a real server
on both databases, read with marquez-python as Marquez answers it: every column the facets name is
a node (dbt-ol's schema lists only documented columns; SQL parsed by openlineage-sql sends none),
``datasetField:`` answers that field or 404, ``depth`` and ``withDownstream`` are honoured, and
every edge's two ends are in ``graph``.

The chain: ``raw`` (no facets) -> job ``stage`` -> ``staged`` (a schema of ``id`` only; column
lineage for ``id`` and ``name``) -> job ``model`` -> ``profile`` (no schema; ``id``, ``display``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import requests
from marquez_client import MarquezClient
from marquez_client.errors import APIError

from api.conftest import TOKEN, ApiServer
from api.test_marquez_runs_events import Rest
from support.ol import PRODUCER, run_event


def _facet(**fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": "https://lotline.test/facet", **fields}


def _lineage(ns: str, **columns: list[tuple[str, str]]) -> dict[str, Any]:
    return _facet(
        fields={
            column: {
                "inputFields": [
                    {
                        "namespace": ns,
                        "name": dataset,
                        "field": field,
                        "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}],
                    }
                    for dataset, field in sources
                ]
            }
            for column, sources in columns.items()
        }
    )


@pytest.fixture
def chain(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> Rest:
    rest = Rest(api_server, http, fresh_ns)
    ns = rest.ns
    stage = run_event(ns, "stage", str(uuid.uuid4()), "COMPLETE", inputs=("raw",), outputs=("staged",))
    stage["outputs"][0]["facets"] = {
        "schema": _facet(fields=[{"name": "id", "type": "INTEGER"}]),
        "columnLineage": _lineage(ns, id=[("raw", "id")], name=[("raw", "first"), ("raw", "last")]),
    }
    model = run_event(
        ns, "model", str(uuid.uuid4()), "COMPLETE", second=1, inputs=("staged",), outputs=("profile",)
    )
    model["outputs"][0]["facets"] = {
        "columnLineage": _lineage(ns, id=[("staged", "id")], display=[("staged", "name")]),
    }
    rest.post(stage)
    rest.post(model)
    return rest


@pytest.fixture
def client(api_server: ApiServer) -> MarquezClient:
    return MarquezClient(url=api_server.url, api_key=TOKEN)


def _ids(answer: dict[str, Any]) -> set[str]:
    return {node["id"] for node in answer["graph"]}


def _field(ns: str, dataset: str, field: str) -> str:
    return f"datasetField:{ns}:{dataset}:{field}"


def _edges_are_closed(answer: dict[str, Any]) -> set[tuple[str, str]]:
    """Every edge's origin and destination are nodes of the answer; the edges, as pairs."""
    ids = _ids(answer)
    edges = set()
    for node in answer["graph"]:
        for edge in node["inEdges"]:
            assert edge["destination"] == node["id"]
            edges.add((edge["origin"], edge["destination"]))
        for edge in node["outEdges"]:
            assert edge["origin"] == node["id"]
            edges.add((edge["origin"], edge["destination"]))
    assert {end for edge in edges for end in edge} <= ids, "an edge names a node the graph lacks"
    return edges


def test_every_column_the_facets_name_is_a_node(chain: Rest, client: MarquezClient) -> None:
    """``staged``'s schema lists ``id`` only, its column lineage ``name`` too; ``profile`` has no
    schema at all (it answered ``{"graph": []}``)."""
    ns = chain.ns
    staged = client.get_column_lineage_by_dataset(ns, "staged", depth=1)
    assert _ids(staged) == {
        _field(ns, "staged", "id"),
        _field(ns, "staged", "name"),
        _field(ns, "raw", "id"),
        _field(ns, "raw", "first"),
        _field(ns, "raw", "last"),
    }
    by_id = {n["id"]: n for n in staged["graph"]}
    assert by_id[_field(ns, "staged", "id")]["data"]["fieldType"] == "INTEGER"
    name = by_id[_field(ns, "staged", "name")]
    assert name["data"]["fieldType"] is None  # no type known: still a node
    assert [(f["dataset"], f["field"]) for f in name["data"]["inputFields"]] == [
        ("raw", "first"),
        ("raw", "last"),
    ]
    assert _edges_are_closed(staged) == {
        (_field(ns, "raw", "id"), _field(ns, "staged", "id")),
        (_field(ns, "raw", "first"), _field(ns, "staged", "name")),
        (_field(ns, "raw", "last"), _field(ns, "staged", "name")),
    }
    profile = client.get_column_lineage_by_dataset(ns, "profile", depth=1)
    assert {i for i in _ids(profile) if ":profile:" in i} == {
        _field(ns, "profile", "id"),
        _field(ns, "profile", "display"),
    }
    # The job's outputs' columns, as Marquez answers a job node.
    assert _ids(client.get_column_lineage_by_job(ns, "model", depth=1)) == _ids(profile)


def test_a_field_node_answers_that_field_to_the_depth_asked(chain: Rest, client: MarquezClient) -> None:
    ns = chain.ns
    display, name = _field(ns, "profile", "display"), _field(ns, "staged", "name")
    first, last = _field(ns, "raw", "first"), _field(ns, "raw", "last")
    whole = client.get_column_lineage_by_dataset_field(ns, "profile", "display")
    assert _ids(whole) == {display, name, first, last}  # not profile's id, nor another field
    assert _edges_are_closed(whole) == {(name, display), (first, name), (last, name)}
    alone = chain.http.get(
        chain.server.api("/column-lineage"), params={"nodeId": display, "depth": 0}, timeout=10
    )
    assert _ids(alone.json()) == {display}  # marquez-python sends depth=0 as its default, 20
    one = client.get_column_lineage_by_dataset_field(ns, "profile", "display", depth=1)
    assert _ids(one) == {display, name}
    assert _edges_are_closed(one) == {(name, display)}
    # The field at the edge of the answer still says what it is computed from.
    [edge_node] = [n for n in one["graph"] if n["id"] == name]
    assert {f["field"] for f in edge_node["data"]["inputFields"]} == {"first", "last"}

    upstream_only = client.get_column_lineage_by_dataset_field(ns, "staged", "name")
    assert _ids(upstream_only) == {name, first, last}
    both = client.get_column_lineage_by_dataset_field(ns, "staged", "name", with_downstream=True)
    assert _ids(both) == {name, first, last, display}
    assert (name, display) in _edges_are_closed(both)
    down_from_raw = client.get_column_lineage_by_dataset_field(
        ns, "raw", "first", depth=2, with_downstream=True
    )
    assert _ids(down_from_raw) == {first, name, display}  # raw has no facets: named by staged's


def test_an_unknown_field_or_bad_parameters_are_clear_errors(chain: Rest, client: MarquezClient) -> None:
    ns = chain.ns
    missing = chain.http.get(
        chain.server.api("/column-lineage"), params={"nodeId": _field(ns, "profile", "nope")}, timeout=10
    )
    assert missing.status_code == 404
    assert missing.json() == {"code": 404, "message": f"Dataset field '{ns}:profile:nope' not found."}
    with pytest.raises(APIError):
        client.get_column_lineage_by_dataset_field(ns, "absent", "id")
    for params, status in (
        ({"nodeId": "datasetField:only-a-name"}, 400),
        ({"nodeId": _field(ns, "profile", "id"), "depth": "-1"}, 422),  # as every query parameter
        ({"nodeId": _field(ns, "profile", "id"), "withDownstream": "sometimes"}, 422),
    ):
        answer = chain.http.get(chain.server.api("/column-lineage"), params=params, timeout=10)
        assert answer.status_code == status, (params, answer.text)
        assert answer.json()["code"] == status and answer.json()["message"]
