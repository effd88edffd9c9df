"""The runner's OpenLineage emission, into a second lotline server over HTTP (the round trip): its
lineage graph of the pipeline is the sender's (nodes, edges, versions per lot, runs and their
states), since the receiver reads the lots back from the subset facets; a dead consumer fails
nothing. On SQLite and PostgreSQL."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest
import requests

from api.conftest import TOKEN, ApiServer, _serve
from lotline.domain.coordination import Status
from lotline.services import Lineage
from lotline.services.emission import HttpConsumer
from lotline.spark.registration import register
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.spark import HALF, LANDED, ingest, land_and_ingest, weblogs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _graph(server: str, namespace: str) -> tuple[set[str], set[tuple[str, str]], dict[str, Any]]:
    """A lineage graph as ``GET /lineage`` answers it around the pipeline's last dataset: its node
    ids, its edges, and each job node's latest run (id, state)."""
    node = f"dataset:{namespace}:hourly_hits"
    answer = requests.get(f"{server}/api/v1/lineage", params={"nodeId": node, "depth": 10}, timeout=30)
    assert answer.status_code == 200, answer.text
    graph = answer.json()["graph"]
    edges = {(e["origin"], e["destination"]) for n in graph for e in n["inEdges"] + n["outEdges"]}
    latest = {
        n["id"]: (n["data"]["latestRun"]["id"], n["data"]["latestRun"]["state"])
        for n in graph
        if n["type"] == "JOB"
    }
    return {n["id"] for n in graph}, edges, latest


def _versions(server: str, namespace: str, dataset: str) -> list[tuple[Any, ...]]:
    """Each version of the dataset: number, lot, state, the run that made it."""
    path = f"/namespaces/{quote(namespace, safe='')}/datasets/{dataset}/versions"
    answer = requests.get(f"{server}/api/v1{path}", params={"limit": 100}, timeout=30)
    assert answer.status_code == 200, answer.text
    return sorted(
        (v["versionNumber"], v["lot"], v["state"], (v.get("createdByRun") or {}).get("id"))
        for v in answer.json()["versions"]
    )


def _events(server: str, namespace: str) -> list[Any]:
    answer = requests.get(f"{server}/api/v1/events/lineage", params={"limit": 1000}, timeout=30)
    assert answer.status_code == 200, answer.text
    return sorted(
        (e["run"]["runId"], e["eventType"], e["eventTime"], e["run"]["facets"].get("nominalTime"))
        for e in answer.json()["events"]
        if e["job"]["namespace"] == namespace
    )


def _runs(server: str, namespace: str, job: str) -> set[tuple[Any, ...]]:
    path = f"/namespaces/{quote(namespace, safe='')}/jobs/{quote(job, safe='')}/runs"
    answer = requests.get(f"{server}/api/v1{path}", params={"limit": 100}, timeout=30)
    assert answer.status_code == 200, answer.text
    return {(r["id"], r["state"], r["lot"], r["nominalStartTime"]) for r in answer.json()["runs"]}


def test_a_second_server_builds_the_same_lineage_graph(
    new_database: Callable[[str], str], spark: SparkSession, api_server: ApiServer, tmp_path: Path
) -> None:
    """The round trip: the demo's pipeline (ingest, parse with a failed attempt and its retry,
    hourly counts) runs with its events posted over HTTP to a second lotline server; both
    servers answer the same graph (nodes, edges, each job's latest run), the same versions of
    every dataset (number, lot, state, producing run) and the same runs (id, state, lot, window).
    The sender's store is of the receiver's kind: SQLite to SQLite, PostgreSQL to PostgreSQL."""
    backend_url = new_database(api_server.backend)
    consumer = HttpConsumer(api_server.url, TOKEN)
    emitting = Lineage.over(Store(backend_url), Storage(str(tmp_path / "warehouse")), consumer=consumer)
    try:
        _round_trip(emitting, backend_url, spark, api_server, tmp_path)
    finally:
        emitting.close()


def _round_trip(
    emitting: Lineage, backend_url: str, spark: SparkSession, api_server: ApiServer, tmp_path: Path
) -> None:
    namespace = f"round-trip-{uuid.uuid4().hex[:8]}"
    pipeline = weblogs(namespace)
    register(emitting, pipeline)
    land_and_ingest(emitting, namespace, tmp_path / "landing")
    summary = run_pipeline(
        LotRunner(emitting, pipeline, spark), pipeline.ordered_jobs(), worker="w", retries=1
    )
    assert not summary.failed

    server, thread, local = _serve(backend_url)  # the sender's own store, read over HTTP too
    try:
        mine, theirs = _graph(local, namespace), _graph(api_server.url, namespace)
        assert mine == theirs
        nodes, edges, _ = mine
        assert f"job:{namespace}:ingest:raw_logs" in nodes and len(edges) == 5
        for dataset in ("raw_logs", "hits", "hourly_hits"):
            assert _versions(local, namespace, dataset) == _versions(api_server.url, namespace, dataset), (
                dataset
            )
        assert "failed" in {v[2] for v in _versions(local, namespace, "hits")}  # lot 001's first attempt
        for job in ("ingest:raw_logs", "parse", "hourly_counts"):
            assert _runs(local, namespace, job) == _runs(api_server.url, namespace, job), job
        # The sender journaled the very events it posted (GET /events/lineage, the Events page).
        journaled, received = _events(local, namespace), _events(api_server.url, namespace)
        assert journaled == received and len(journaled) == 3 * 2 + 4 * 2 + 2
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_a_dead_consumer_fails_no_lot(lineage: Lineage, spark: SparkSession) -> None:
    namespace = f"dead-{uuid.uuid4().hex[:8]}"
    pipeline = weblogs(namespace)
    register(lineage, pipeline)
    ingest(lineage, namespace, "raw_logs", HALF[0], [[next(iter(LANDED.values()))]])
    dead = HttpConsumer("http://127.0.0.1:9")  # nothing listens
    runner = LotRunner(Lineage.over(lineage.store, lineage.storage, consumer=dead), pipeline, spark)
    started = time.monotonic()
    summary = run_pipeline(runner, pipeline.select(["parse"]), worker="emit")
    assert not summary.failed
    assert lineage.lots.counts(namespace, "parse") == {Status.READY: 1}
    print(f"one lot with an unreachable consumer: {time.monotonic() - started:.2f} s")
