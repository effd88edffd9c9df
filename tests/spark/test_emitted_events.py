"""lotline's own runs as OpenLineage events (docs/api.md "Events lotline emits"): every lot's run —
ingest's, the runner's, a failed attempt's, each child run of child work — is journaled locally as
events that validate against the spec's schemas (vendored, tests/support/schemas), carry
``nominalTime`` and ``jobDependencies`` (the runs that produced the input lots), and are stored
as applied: the projector never applies them again. Real Spark, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lotline.domain.coordination import Status
from lotline.domain.lots import IntervalLot, parse_lot
from lotline.services import Lineage
from lotline.spark.pipeline import Pipeline
from lotline.spark.registration import register
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner
from support.ol_schema import facet_violations, violations
from support.spark import HALF, land_and_ingest, weblogs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def journaled(lineage: Lineage, namespace: str) -> list[dict[str, Any]]:
    page = lineage.openlineage.list_events(job_namespace=namespace, limit=1000, sort_direction="asc")
    return list(page.items)


def test_every_run_of_a_pipeline_is_journaled_as_valid_events(
    lineage: Lineage, spark: SparkSession, tmp_path: Path
) -> None:
    namespace = f"emitted-{uuid.uuid4().hex[:8]}"
    pipeline = weblogs(namespace)
    register(lineage, pipeline)
    land_and_ingest(lineage, namespace, tmp_path / "landing")
    summary = run_pipeline(
        LotRunner(lineage, pipeline, spark), pipeline.ordered_jobs(), worker="w", retries=1
    )
    assert not summary.failed
    assert lineage.lots.counts(namespace, "hourly_counts")[Status.READY] == 1  # 00:00-01:00

    events = journaled(lineage, namespace)
    for event in events:
        assert violations(event) == [], (event["job"]["name"], event["eventType"])
    kinds = sorted((e["job"]["name"], e["eventType"]) for e in events)
    assert kinds == sorted(
        [("ingest:raw_logs", t) for t in ("START", "COMPLETE") for _ in HALF]
        + [("parse", t) for t in ("START", "COMPLETE") for _ in HALF]
        + [("parse", "START"), ("parse", "FAIL")]  # lot 001's first attempt
        + [("hourly_counts", t) for t in ("START", "COMPLETE")]
    )

    # Each run's events carry its lot's window, as its own record does; the runner's run and
    # every event of it name the same run id.
    for event in events:
        run = lineage.runs.get_run(uuid.UUID(event["run"]["runId"]))
        nominal = event["run"]["facets"]["nominalTime"]
        assert nominal == run.facets["nominalTime"]
        window = parse_lot(run.lot or "")
        assert isinstance(window, IntervalLot)
        assert (nominal["nominalStartTime"], nominal["nominalEndTime"]) == (
            window.start.isoformat(),
            window.end.isoformat(),
        )
        # The run's record too (GET /jobs/runs/{id} nominalStartTime/nominalEndTime).
        assert (run.nominal_start_time, run.nominal_end_time) == (window.start, window.end)
        # The lot's output is named in every event of its run, with the lot in its subset facet.
        (output,) = event["outputs"]
        assert output["outputFacets"]["subset"]["outputCondition"]["partitions"] == [
            {"dimensions": {"lot": run.lot}, "identifier": run.lot}
        ]

    # Lot lineage: a run's jobDependencies are the runs that produced the input lots it read.
    for event in (e for e in events if e["eventType"] == "START" and e["job"]["name"] != "ingest:raw_logs"):
        run_id = uuid.UUID(event["run"]["runId"])
        (read,) = event["inputs"]
        lots = [p["identifier"] for p in read["inputFacets"]["subset"]["inputCondition"]["partitions"]]
        manifests = lineage.manifests.readable(namespace, read["name"], lots)
        producers = {
            (namespace, lineage.runs.get_run(m.run_id).job, str(m.run_id)) for m in manifests.values()
        }  # type: ignore[arg-type]
        upstream = event["run"]["facets"]["jobDependencies"]["upstream"]
        assert {
            (u["job"]["namespace"], u["job"]["name"], u["run"]["runId"]) for u in upstream
        } == producers, run_id
    parse_upstream = {
        u["job"]["name"]
        for e in events
        if e["job"]["name"] == "parse"
        for u in e["run"]["facets"].get("jobDependencies", {}).get("upstream", [])
    }
    assert parse_upstream == {"ingest:raw_logs"}  # the raw dataset has its producer, also downstream

    # The version a lot's run wrote carries spec facets (built by the same code), valid too.
    version = lineage.versions.current_version(namespace, "hits", HALF[0])
    assert version is not None
    for name, facet in version.facets.items():
        assert facet_violations(name, facet) == []
    assert set(version.facets) >= {"outputStatistics", "schema", "columnLineage"}

    # Journaled as applied: nothing is pending, and a projector finds nothing to apply.
    assert lineage.projection.drain().applied == ()
    assert lineage.projection.status().pending == 0


def test_child_runs_are_journaled_under_their_lot_run(lineage: Lineage, spark: SparkSession) -> None:
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from lotline.spark.pipeline import Lot
    from support.spark import ingest_files

    namespace = f"parts-{uuid.uuid4().hex[:8]}"
    pipeline = Pipeline(namespace)
    events_ds = pipeline.dataset("events", format="text", interval="P1D")
    totals = pipeline.dataset("totals", format="parquet", interval="P1D")

    @pipeline.job(inputs=[events_ds], output=totals, partition_by=("region",), parallel_parts=1)
    def total(events: DataFrame, lot: Lot) -> DataFrame:
        return events.agg(F.count("value").alias("lines")).withColumn("part", F.lit(lot.part))

    register(lineage, pipeline)
    day = "20230101P1D000"
    ingest_files(lineage, namespace, "events", day, {f"region={r}/e.txt": ["x"] for r in ("eu", "us")})
    summary = run_pipeline(LotRunner(lineage, pipeline, spark), pipeline.ordered_jobs(), worker="w")
    assert not summary.failed

    events = [e for e in journaled(lineage, namespace) if e["job"]["name"] == "total"]
    for event in events:
        assert violations(event) == [], event["eventType"]
    (lot_start,) = [e for e in events if "parent" not in e["run"]["facets"] and e["eventType"] == "START"]
    lot_run = lot_start["run"]["runId"]
    children = [e for e in events if "parent" in e["run"]["facets"]]
    assert sorted((e["run"]["facets"]["lotline_part"]["part"], e["eventType"]) for e in children) == [
        ("region=eu", "COMPLETE"),
        ("region=eu", "START"),
        ("region=us", "COMPLETE"),
        ("region=us", "START"),
    ]
    for child in children:
        parent = child["run"]["facets"]["parent"]
        assert parent["run"]["runId"] == parent["root"]["run"]["runId"] == lot_run
        assert parent["job"] == {"namespace": namespace, "name": "total", "facets": {}}
        assert child["outputs"] == []  # a child writes no version of its own
        assert lineage.runs.get_run(uuid.UUID(child["run"]["runId"])).parent_run_id == uuid.UUID(lot_run)
