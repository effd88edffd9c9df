"""The runner's OpenLineage emission, into a second lotline server: its lineage of the pipeline is
the first's (same jobs, datasets, edges, one run per lot with the same ids and states), datasets
keep one name across lots (the lot is in the subset facets), and a dead consumer fails nothing."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest
import requests

from api.conftest import TOKEN, ApiServer
from lotline.domain.coordination import Status
from lotline.services import Lineage
from lotline.services.emission import HttpConsumer
from lotline.spark.pipeline import Pipeline, load_pipeline
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner, register
from support.spark import PIPELINES, ingest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HALF = ["20230101PT30M000", "20230101PT30M001", "20230101PT30M002"]
LINES = {
    HALF[0]: [["2023-01-01T00:01:00 /a 200"]],
    HALF[1]: [["2023-01-01T00:31:00 /b 599"]],  # fails its first attempt
    HALF[2]: [["2023-01-01T01:01:00 /a 200"]],
}


def _pipeline(namespace: str) -> Pipeline:
    pipeline = load_pipeline(str(PIPELINES / "weblogs.py"))
    pipeline.namespace = namespace  # one namespace per test on the shared second server
    return pipeline


def _get(server: ApiServer, *parts: str) -> dict[str, object]:
    answer = requests.get(server.api("/" + "/".join(quote(p, safe="") for p in parts)), timeout=10)
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_a_second_server_sees_the_same_lineage(
    lineage: Lineage, spark: SparkSession, api_server: ApiServer
) -> None:
    namespace = f"emitted-{uuid.uuid4().hex[:8]}"
    pipeline = _pipeline(namespace)
    register(lineage, pipeline)
    for lot, files in LINES.items():
        ingest(lineage, namespace, "raw_logs", lot, files)
    emitting = Lineage.over(lineage.store, lineage.storage, consumer=HttpConsumer(api_server.url, TOKEN))
    runner = LotRunner(emitting, pipeline, spark)
    summary = run_pipeline(runner, pipeline.ordered_jobs(), worker="emit", retries=1)
    assert not summary.failed

    for job in ("parse", "hourly_counts"):
        mine = {(str(r.id), r.state.value) for r in lineage.runs.list_runs(namespace, job).items}
        theirs_runs = _get(api_server, "namespaces", namespace, "jobs", job, "runs")["runs"]
        theirs = {(r["id"], r["state"]) for r in theirs_runs}  # type: ignore[union-attr, index]
        assert theirs == mine, job
        my_job = lineage.catalog.get_job(namespace, job)
        their_job = _get(api_server, "namespaces", namespace, "jobs", job)
        assert {i["name"] for i in their_job["inputs"]} == {r.name for r in my_job.inputs}  # type: ignore[union-attr, index]
        assert {o["name"] for o in their_job["outputs"]} == {r.name for r in my_job.outputs}  # type: ignore[union-attr, index]
    datasets = _get(api_server, "namespaces", namespace, "datasets")["datasets"]
    assert sorted(d["name"] for d in datasets) == ["hits", "hourly_hits", "raw_logs"]  # type: ignore[union-attr, index]

    events = requests.get(api_server.api("/events/lineage"), params={"limit": 1000}, timeout=10).json()
    mine_events = [e for e in events["events"] if e.get("job", {}).get("namespace") == namespace]
    parse_completes = [e for e in mine_events if e["job"]["name"] == "parse" and e["eventType"] == "COMPLETE"]
    subsets = sorted(
        p["identifier"]
        for e in parse_completes
        for p in e["outputs"][0]["outputFacets"]["subset"]["outputCondition"]["partitions"]
    )
    assert subsets == HALF  # one lot per run, carried in the facet, never in the name
    fails = [e for e in mine_events if e["eventType"] == "FAIL"]
    assert len(fails) == 1 and "unparseable line" in fails[0]["run"]["facets"]["errorMessage"]["message"]


@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_a_dead_consumer_fails_no_lot(lineage: Lineage, spark: SparkSession) -> None:
    namespace = f"dead-{uuid.uuid4().hex[:8]}"
    pipeline = _pipeline(namespace)
    register(lineage, pipeline)
    ingest(lineage, namespace, "raw_logs", HALF[0], LINES[HALF[0]])
    dead = HttpConsumer("http://127.0.0.1:9")  # nothing listens
    runner = LotRunner(Lineage.over(lineage.store, lineage.storage, consumer=dead), pipeline, spark)
    started = time.monotonic()
    summary = run_pipeline(runner, pipeline.select(["parse"]), worker="emit")
    assert not summary.failed
    assert lineage.lots.counts(namespace, "parse") == {Status.READY: 1}
    print(f"one lot with an unreachable consumer: {time.monotonic() - started:.2f} s")
