"""The lineage graph, search and soft delete over HTTP, with names containing ``:`` and ``/``."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import requests

from api.conftest import ApiServer


def build_chain(server: ApiServer, http: requests.Session, ns: str) -> None:
    """raw:a/b --extract--> staged --load--> mart, and raw:a/b --audit--> report."""
    q = quote(ns, safe="")
    http.put(server.api(f"/namespaces/{q}"), json={"ownerName": "me"}, timeout=10)
    for name in ("raw:a/b", "staged", "mart", "report"):
        http.put(server.api(f"/namespaces/{q}/datasets/{quote(name, safe='')}"), json={}, timeout=10)
    for job, inputs, outputs in (
        ("etl/extract", ["raw:a/b"], ["staged"]),
        ("etl/load", ["staged"], ["mart"]),
        ("audit", ["raw:a/b"], ["report"]),
    ):
        body = {
            "inputs": [{"namespace": ns, "name": n} for n in inputs],
            "outputs": [{"namespace": ns, "name": n} for n in outputs],
        }
        answer = http.put(server.api(f"/namespaces/{q}/jobs/{quote(job, safe='')}"), json=body, timeout=10)
        assert answer.status_code == 200, answer.text


def graph(server: ApiServer, node_id: str, depth: int) -> dict[str, Any]:
    answer = requests.get(server.api("/lineage"), params={"nodeId": node_id, "depth": depth}, timeout=10)
    assert answer.status_code == 200, answer.text
    return {n["id"]: n for n in answer.json()["graph"]}


def test_lineage_graph_depth_and_edges(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> None:
    build_chain(api_server, http, fresh_ns)
    d = f"dataset:{fresh_ns}:"
    j = f"job:{fresh_ns}:"
    one = graph(api_server, f"{d}raw:a/b", 1)
    assert set(one) == {f"{d}raw:a/b", f"{j}etl/extract", f"{j}audit", f"{d}staged", f"{d}report"}
    extract = one[f"{j}etl/extract"]
    assert extract["type"] == "JOB" and extract["data"]["name"] == "etl/extract"
    assert extract["inEdges"] == [{"origin": f"{d}raw:a/b", "destination": f"{j}etl/extract"}]
    assert extract["outEdges"] == [{"origin": f"{j}etl/extract", "destination": f"{d}staged"}]
    assert one[f"{d}raw:a/b"]["type"] == "DATASET" and len(one[f"{d}raw:a/b"]["outEdges"]) == 2
    full = graph(api_server, f"{j}etl/load", 20)
    assert set(full) == set(one) | {f"{j}etl/load", f"{d}mart"}
    assert set(graph(api_server, f"{d}mart#some-version", 0)) == {f"{d}mart"}


def test_search(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> None:
    build_chain(api_server, http, fresh_ns)
    params: dict[str, Any] = {"q": "etl/", "namespace": fresh_ns}
    found = requests.get(api_server.api("/search"), params=params, timeout=10).json()
    assert found["totalCount"] == 2
    expected = [f"job:{fresh_ns}:etl/extract", f"job:{fresh_ns}:etl/load"]
    assert [r["nodeId"] for r in found["results"]] == expected
    datasets = {**params, "q": "A", "filter": "DATASET"}
    only = requests.get(api_server.api("/search"), params=datasets, timeout=10)
    assert {r["name"] for r in only.json()["results"]} == {"raw:a/b", "mart", "staged"}
    bad = requests.get(api_server.api("/search"), params={"q": "x", "filter": "NOPE"}, timeout=10)
    assert bad.status_code == 422


def test_soft_delete_hides_until_written_again(
    api_server: ApiServer, http: requests.Session, fresh_ns: str
) -> None:
    build_chain(api_server, http, fresh_ns)
    path = api_server.api(f"/namespaces/{quote(fresh_ns, safe='')}/datasets/report")
    deleted = http.delete(path, timeout=10)
    assert (deleted.status_code, deleted.json()["deleted"]) == (200, True)
    assert http.get(path, timeout=10).status_code == 404
    assert http.delete(path, timeout=10).status_code == 404
    listed = http.get(api_server.api(f"/namespaces/{quote(fresh_ns, safe='')}/datasets"), timeout=10).json()
    assert [d["name"] for d in listed["datasets"]] == ["mart", "raw:a/b", "staged"]
    assert f"dataset:{fresh_ns}:report" not in graph(api_server, f"job:{fresh_ns}:audit", 1)
    assert http.put(path, json={}, timeout=10).status_code == 200
    assert http.get(path, timeout=10).status_code == 200


def test_tags_untag_and_unknown_field(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> None:
    build_chain(api_server, http, fresh_ns)
    path = api_server.api(f"/namespaces/{quote(fresh_ns, safe='')}/datasets/mart")
    assert http.post(f"{path}/tags/gold", timeout=10).json()["tags"] == ["gold"]
    assert http.delete(f"{path}/tags/gold", timeout=10).json()["tags"] == []
    assert http.post(f"{path}/fields/nope/tags/PII", timeout=10).status_code == 404
