"""Child work (SPEC §5, seed 004's parts and children): a lot computed part by part, each part a
child run with its own manifest; when a part fails the lot fails, the parts that succeeded are
kept, and the retry runs only the failed parts. Real Spark, on SQLite and PostgreSQL (``lineage``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from lotline.domain.coordination import Status
from lotline.domain.manifests import ManifestState
from lotline.domain.runs import RunState
from lotline.services import Lineage
from lotline.spark.pipeline import Lot, Pipeline, PipelineError
from lotline.spark.registration import register
from lotline.spark.run import RunSummary, run_pipeline
from lotline.spark.runner import LotRunner
from lotline.store.types import utcnow
from support.spark import ingest_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NS = "parts"
DAY = "20230101P1D000"
REGIONS = {
    "ap": ["u1 3", "u2 4"],
    "eu": ["u3 5", "u4 6", "u5 7"],
    "us": ["u6 8"],
}


def _pipeline(
    failing: dict[str, set[int]],
    partition_by: Any = ("region",),
    parallel: int = 2,
    probe: Callable[[], None] = lambda: None,
) -> Pipeline:
    """events (text, one folder per region) -> ``total`` per region, computed region by region;
    ``failing`` names the parts (by region value, or part name) that fail at the given attempts;
    ``probe`` is called by every part as it runs."""
    from pyspark.sql import functions as F

    p = Pipeline(NS)
    events = p.dataset("events", format="text", interval="P1D")
    totals = p.dataset("totals", format="parquet", interval="P1D")

    @p.job(inputs=[events], output=totals, partition_by=partition_by, parallel_parts=parallel)
    def total(events: DataFrame, lot: Lot) -> DataFrame:
        assert lot.part is not None and lot.child_run_id is not None
        name = lot.part_values.get("region", lot.part)
        probe()
        if lot.attempt in failing.get(name, set()):
            raise RuntimeError(f"part {name} is broken")
        parts = F.split("value", " ")
        amounts = events.select(parts[0].alias("user"), parts[1].cast("int").alias("amount"))
        return amounts.agg(F.count("user").alias("users"), F.sum("amount").alias("amount")).withColumn(
            "part", F.lit(lot.part)
        )

    return p


def _ingest(lineage: Lineage, files: dict[str, list[str]] | None = None) -> None:
    files = files or {f"region={r}/events.txt": lines for r, lines in REGIONS.items()}
    ingest_files(lineage, NS, "events", DAY, files)


def _run(lineage: Lineage, pipeline: Pipeline, spark: SparkSession) -> RunSummary:
    return run_pipeline(LotRunner(lineage, pipeline, spark), pipeline.ordered_jobs(), worker="test")


def _parts(lineage: Lineage) -> dict[str, list[tuple[int, ManifestState]]]:
    """Every child manifest of the lot: part -> [(attempt, state)]."""
    found: dict[str, list[tuple[int, ManifestState]]] = {}
    for manifest in lineage.manifests.history(NS, "totals", DAY):
        if manifest.part is not None:
            found.setdefault(manifest.part, []).append((manifest.attempt, manifest.state))
    return found


def _lot_runs(lineage: Lineage) -> list[Any]:
    """The lot's own runs (the children are runs of the job too, with a parent), oldest first."""
    runs = lineage.runs.list_runs(NS, "total").items
    return sorted((r for r in runs if r.parent_run_id is None), key=lambda r: r.created_at)


def _read(lineage: Lineage, spark: SparkSession) -> list[tuple[Any, ...]]:
    manifest = lineage.manifests.current(NS, "totals", DAY)
    assert manifest is not None
    frame = spark.read.parquet(*[o.uri for o in manifest.objects])
    return sorted(tuple(r) for r in frame.select("part", "users", "amount").collect())


def test_a_failed_part_fails_the_lot_and_the_retry_runs_only_that_part(
    lineage: Lineage, spark: SparkSession
) -> None:
    seen: list[tuple[object, Status]] = []

    def reader() -> None:
        """What a reader of the lot finds while its parts are being computed."""
        [status] = lineage.lots.status(NS, job="total")
        seen.append((lineage.manifests.current(NS, "totals", DAY), status.status))

    pipeline = _pipeline({"eu": {1}}, probe=reader)
    register(lineage, pipeline)
    _ingest(lineage)

    first = _run(lineage, pipeline, spark)
    assert first.failed, "the eu part fails at the first attempt"
    assert "1 of 3 parts failed" in first.errors[0] and "part region=eu" in first.errors[0]
    # The lot is not readable: no reader can see a lot with a part missing.
    [status] = lineage.lots.status(NS, job="total")
    assert status.status is Status.ERROR
    assert lineage.manifests.current(NS, "totals", DAY) is None
    # The parts that succeeded are kept; the failed one's manifest was removed with its objects.
    assert _parts(lineage) == {
        "region=ap": [(1, ManifestState.COMPLETE)],
        "region=eu": [(1, ManifestState.REMOVED)],
        "region=us": [(1, ManifestState.COMPLETE)],
    }
    storage = lineage.storage
    eu_folder = f"{storage.attempt_uri(NS, 'totals', DAY, 1)}/region=eu"
    assert list(storage.objects_under(eu_folder)) == []
    kept = {
        m.part: [(o.uri, o.size, o.modified_at) for o in m.objects]
        for m in lineage.manifests.history(NS, "totals", DAY)
        if m.state is ManifestState.COMPLETE
    }
    assert set(kept) == {"region=ap", "region=us"}
    for objects in kept.values():
        assert objects
        assert all(storage.stat(uri).size == size for uri, size, _ in objects)
    [first_run] = _lot_runs(lineage)
    children = lineage.runs.child_runs(first_run.id)
    assert sorted((c.facets["lotline_part"]["part"], c.state) for c in children) == [
        ("region=ap", RunState.COMPLETED),
        ("region=eu", RunState.FAILED),
        ("region=us", RunState.COMPLETED),
    ]
    assert (
        "part eu is broken"
        in next(c for c in children if c.state is RunState.FAILED).facets["errorMessage"]["message"]
    )

    # Cleanup keeps what the kept parts' manifests list, long after their attempt failed (it only
    # deletes what Spark left beside them: _SUCCESS, .crc), and copies each removed part's manifest
    # to its own place.
    later = utcnow() + timedelta(hours=1)
    lineage.cleanup.cleanup(grace=timedelta(0), max_lease=timedelta(seconds=60), now=later)
    assert all(storage.exists(uri) for objects in kept.values() for uri, _, _ in objects)
    [removed] = [m for m in lineage.manifests.history(NS, "totals", DAY) if m.state is ManifestState.REMOVED]
    copy = storage.manifest_copy_uri(removed)
    assert copy.endswith("/state=removed/attempt=1/region=eu/manifest.json")
    assert storage.exists(copy)

    second = _run(lineage, pipeline, spark)
    assert not second.failed, second.errors
    # Only the failed part ran again; the kept parts are the very same objects.
    runs = _lot_runs(lineage)
    assert [r.state for r in runs] == [RunState.FAILED, RunState.COMPLETED]
    retry_children = lineage.runs.child_runs(runs[1].id)
    assert [(c.facets["lotline_part"]["part"], c.state) for c in retry_children] == [
        ("region=eu", RunState.COMPLETED)
    ]
    assert runs[1].facets["lotline_parts"]["kept"] == ["region=ap", "region=us"]
    assert runs[1].facets["lotline_parts"]["ran"] == ["region=eu"]
    assert _parts(lineage)["region=eu"] == [(1, ManifestState.REMOVED), (2, ManifestState.COMPLETE)]
    manifest = lineage.manifests.current(NS, "totals", DAY)
    assert manifest is not None
    assert manifest.attempt == 2
    listed = {(o.uri, o.size, o.modified_at) for o in manifest.objects}
    assert all(set(objects) <= listed for objects in kept.values())
    assert {o.partition_values["region"] for o in manifest.objects} == {"ap", "eu", "us"}
    assert manifest.row_count == 3
    assert _read(lineage, spark) == [("region=ap", 2, 7), ("region=eu", 3, 18), ("region=us", 1, 8)]
    # While parts ran (3 in the first attempt, 1 in the retry) the lot was never readable.
    assert seen == [(None, Status.RUNNING)] * 4

    # Reopening the lot after its success asks for it whole again: every part runs.
    lineage.lots.invalidate(NS, "totals", DAY)
    third = _run(lineage, pipeline, spark)
    assert not third.failed, third.errors
    latest = _lot_runs(lineage)[-1]
    assert sorted(c.facets["lotline_part"]["part"] for c in lineage.runs.child_runs(latest.id)) == [
        "region=ap",
        "region=eu",
        "region=us",
    ]
    assert latest.facets["lotline_parts"]["kept"] == []


def test_parts_of_a_lot_run_in_parallel_as_groups_of_objects(lineage: Lineage, spark: SparkSession) -> None:
    pipeline = _pipeline({}, partition_by=2, parallel=3)
    register(lineage, pipeline)
    files = {f"f{i}.txt": [f"u{i} {i}"] for i in range(5)}
    _ingest(lineage, files)
    summary = _run(lineage, pipeline, spark)
    assert not summary.failed, summary.errors
    assert _read(lineage, spark) == [("part=00000", 2, 1), ("part=00001", 2, 5), ("part=00002", 1, 4)]
    [run] = _lot_runs(lineage)
    children = lineage.runs.child_runs(run.id)
    assert sorted(c.facets["lotline_part"]["part"] for c in children) == [
        "part=00000",
        "part=00001",
        "part=00002",
    ]
    assert {c.parent_run_id for c in children} == {run.id}
    assert {c.state for c in children} == {RunState.COMPLETED}


def test_an_object_without_the_partition_value_fails_the_lot_naming_it(
    lineage: Lineage, spark: SparkSession
) -> None:
    pipeline = _pipeline({})
    register(lineage, pipeline)
    _ingest(lineage, {"region=ap/a.txt": ["u1 1"], "stray.txt": ["u2 2"]})
    summary = _run(lineage, pipeline, spark)
    assert summary.failed
    assert "stray.txt has no partition value 'region'" in summary.errors[0]
    assert _parts(lineage) == {}  # nothing ran


@pytest.mark.parametrize(
    ("partition_by", "parallel", "message"),
    [
        ("region", 2, "list of partition names"),
        ([], 2, "list of partition names"),
        (0, 2, "at least 1 object"),
        (["a/b"], 2, "cannot name a folder"),
        (["day", "day"], 2, "twice"),
        (["day"], 0, "parallel_parts must be a positive integer"),
    ],
)
def test_bad_partitioning_is_refused_when_the_job_is_declared(
    partition_by: Any, parallel: int, message: str
) -> None:
    with pytest.raises(PipelineError, match=message):
        _pipeline({}, partition_by=partition_by, parallel=parallel)
