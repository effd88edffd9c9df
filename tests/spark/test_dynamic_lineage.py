"""Dynamic lineage (SPEC §7, seed 003): what a transform really read, from Spark's plans.

A transform that opens a lookup table itself — not declared as an input — still shows it in
lineage: as an input of its run and, marked undeclared, of its job in the graph, with the schema
that was read. Each written column's sources become the output's ``columnLineage`` facet.
Real Spark (the session-scoped ``local[1]`` session), on SQLite and PostgreSQL (``lineage``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lotline.api.dto import job_json
from lotline.domain.model import DatasetRef
from lotline.services import Lineage
from lotline.spark.pipeline import Lot, Pipeline
from lotline.spark.registration import register
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner
from support.spark import ingest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NS = "enrich"
LOTS = ["20230101PT30M000", "20230101PT30M001"]
LINES = {
    LOTS[0]: [["2023-01-01T00:01:00 /a 200", "2023-01-01T00:02:00 /b 404"]],
    LOTS[1]: [["2023-01-01T00:40:00 /a 500"]],
}


def _pipeline(lookup: Path) -> Pipeline:
    """raw text lots -> ``label`` (joins a status lookup CSV it opens itself) -> labelled hits
    -> ``per_label`` (declared input only: renames, an expression, an aggregation)."""
    from pyspark.sql import functions as F

    p = Pipeline(NS)
    raw = p.dataset("raw_logs", format="text", interval="PT30M")
    labelled = p.dataset("labelled", format="parquet", interval="PT30M")
    counts = p.dataset("per_label", format="parquet", interval="PT30M")

    @p.job(inputs=[raw], output=labelled)
    def label(raw_logs: DataFrame, lot: Lot) -> DataFrame:
        statuses = lot.spark.read.option("header", "true").csv(str(lookup))
        parts = F.split("value", " ")
        hits = raw_logs.select(parts[1].alias("url"), parts[2].alias("status"))
        return hits.join(statuses, "status").select("url", F.col("label").alias("outcome"), "status")

    @p.job(inputs=[labelled], output=counts)
    def per_label(labelled: DataFrame, lot: Lot) -> DataFrame:
        return labelled.groupBy(F.upper("outcome").alias("kind")).agg(F.count("url").alias("hits"))

    return p


@pytest.fixture
def lookup(tmp_path: Path) -> Path:
    folder = tmp_path / "lookups" / "statuses"
    folder.mkdir(parents=True)
    (folder / "statuses.csv").write_text("status,label\n200,ok\n404,missing\n500,broken\n")
    return folder


def test_an_undeclared_lookup_is_an_input_of_the_run_and_of_the_job(
    lineage: Lineage, spark: SparkSession, lookup: Path
) -> None:
    pipeline = _pipeline(lookup)
    register(lineage, pipeline)
    for lot, files in LINES.items():
        ingest(lineage, NS, "raw_logs", lot, files)
    summary = run_pipeline(LotRunner(lineage, pipeline, spark), pipeline.ordered_jobs(), worker="test")
    assert not summary.failed, summary.errors
    assert summary.tallies["label"].done == 2

    read = DatasetRef("file", str(lookup))
    # The lookup is a dataset, with the schema Spark read it with, where the data is.
    found = lineage.catalog.get_dataset("file", str(lookup))
    assert [(f.name, f.type) for f in found.fields] == [("status", "string"), ("label", "string")]
    assert found.physical_name.rstrip("/").endswith(str(lookup))
    # Every run of the job read it (unpartitioned, so lot ''), beside its declared input lot.
    for run in lineage.runs.list_runs(NS, "label").items:
        assert {(io.namespace, io.dataset, io.lot) for io in run.inputs} == {
            (NS, "raw_logs", run.lot),
            ("file", str(lookup), None),
        }
    # The job: an input, marked undeclared; the declared one is not marked.
    job = lineage.catalog.get_job(NS, "label")
    assert set(job.inputs) == {DatasetRef(NS, "raw_logs"), read}
    assert job.undeclared_inputs == (read,)
    assert job_json(job, None, {})["undeclaredInputs"] == [{"namespace": "file", "name": str(lookup)}]
    # The graph: from the lookup, the job that read it and what it made; and back from the job.
    graph = lineage.graph.lineage(f"dataset:file:{lookup}", depth=1)
    nodes = {n.key.id: n for n in graph}
    assert {f"job:{NS}:label", f"dataset:{NS}:labelled", f"dataset:{NS}:raw_logs"} <= set(nodes)
    [edge] = nodes[f"dataset:file:{lookup}"].out_edges
    assert (edge.origin, edge.destination) == (f"dataset:file:{lookup}", f"job:{NS}:label")
    from_job = {n.key.id for n in lineage.graph.lineage(f"job:{NS}:label", depth=0)}
    assert f"dataset:file:{lookup}" in from_job
    # A job that reads only what it declares has no undeclared input.
    assert lineage.catalog.get_job(NS, "per_label").undeclared_inputs == ()


def test_column_lineage_follows_renames_expressions_joins_and_aggregations(
    lineage: Lineage, spark: SparkSession, lookup: Path
) -> None:
    pipeline = _pipeline(lookup)
    register(lineage, pipeline)
    ingest(lineage, NS, "raw_logs", LOTS[0], LINES[LOTS[0]])
    summary = run_pipeline(LotRunner(lineage, pipeline, spark), pipeline.ordered_jobs(), worker="test")
    assert not summary.failed, summary.errors

    def sources(dataset: str) -> dict[str, set[tuple[str, str, str, str]]]:
        facet = lineage.catalog.get_dataset(NS, dataset).facets["columnLineage"]
        return {
            column: {
                (i["namespace"], i["name"], i["field"], i["transformations"][0]["subtype"])
                for i in entry["inputFields"]
            }
            for column, entry in facet["fields"].items()
        }

    lookup_name = str(lookup)
    assert sources("labelled") == {
        "url": {(NS, "raw_logs", "value", "TRANSFORMATION")},  # split(value)[1]
        "outcome": {("file", lookup_name, "label", "IDENTITY")},  # a rename through the join
        # The join key: the raw side's column (USING keeps the left one).
        "status": {(NS, "raw_logs", "value", "TRANSFORMATION")},
    }
    assert sources("per_label") == {
        "kind": {(NS, "labelled", "outcome", "TRANSFORMATION")},
        "hits": {(NS, "labelled", "url", "AGGREGATION")},
    }
    # The lot's version carries them too, with the write's statistics and schema.
    version = lineage.versions.current_version(NS, "labelled", LOTS[0])
    assert version is not None
    statistics = version.facets["outputStatistics"]
    manifest = lineage.manifests.current(NS, "labelled", LOTS[0])
    assert manifest is not None
    assert (statistics["rowCount"], statistics["fileCount"], statistics["size"]) == (
        2,
        len(manifest.objects),
        manifest.total_bytes,
    )
    assert [f["name"] for f in version.facets["schema"]["fields"]] == ["url", "outcome", "status"]
    assert set(version.facets["columnLineage"]["fields"]) == {"url", "outcome", "status"}
