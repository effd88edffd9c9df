"""Seed 002's scenarios end to end through real Spark jobs, on SQLite and PostgreSQL (``lineage``).

The weblogs pipeline (``pipelines/weblogs.py``): raw half-hour text lots -> ``parse`` -> hits ->
``hourly_counts`` (two half-hour lots make an hour). Raw lots are published by ``ingest``
(conftest), as ``lotline ingest`` would. Spark actions are few: one session, small lots.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lotline.domain.clock import ManualClock
from lotline.domain.coordination import Role, Status
from lotline.domain.manifests import ManifestState
from lotline.domain.runs import RunState
from lotline.services import Lineage
from lotline.spark.pipeline import Lot, Pipeline, load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import RunSummary, Window, run_pipeline
from lotline.spark.runner import RUNNER_LEASE, LotRunner
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.polling import wait_until
from support.spark import PIPELINES, ingest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NS = "weblogs"
HALF = ["20230101PT30M000", "20230101PT30M001", "20230101PT30M002", "20230101PT30M003"]
HOUR = ["20230101PT1H000", "20230101PT1H001"]
LOTS = {
    HALF[0]: [
        ["2023-01-01T00:01:00 /a 200", "2023-01-01T00:02:00 /b 200", "2023-01-01T00:03:00 /a 404"],
        ["2023-01-01T00:20:00 /a 200"],
    ],
    HALF[1]: [["2023-01-01T00:40:00 /a 200", "2023-01-01T00:50:00 /c 500"]],
    HALF[2]: [],  # an empty lot: hour 01 has data in its second half only
    HALF[3]: [["2023-01-01T01:45:00 /b 200"]],
}


@pytest.fixture
def weblogs() -> Pipeline:
    return load_pipeline(str(PIPELINES / "weblogs.py"))


@pytest.fixture
def runner(lineage: Lineage, weblogs: Pipeline, spark: SparkSession) -> Iterator[LotRunner]:
    register(lineage, weblogs)
    yield LotRunner(lineage, weblogs, spark)


def _run(runner: LotRunner, **options: object) -> RunSummary:
    return run_pipeline(runner, runner.pipeline.ordered_jobs(), worker="test", **options)  # type: ignore[arg-type]


def _ingest_all(lineage: Lineage, lots: dict[str, list[list[str]]] = LOTS) -> None:
    for lot, files in lots.items():
        ingest(lineage, NS, "raw_logs", lot, files)


def _read(spark: SparkSession, lineage: Lineage, dataset: str, lots: list[str]) -> DataFrame:
    """What a reader of these lots sees: exactly the objects of their current manifests."""
    uris = []
    for lot in lots:
        manifest = lineage.manifests.current(NS, dataset, lot)
        assert manifest is not None
        uris += [o.uri for o in manifest.objects]
    return spark.read.parquet(*uris)


def _expected_hourly(spark: SparkSession, lines: list[str], hour: str) -> DataFrame:
    """The same computation in plain PySpark, over the raw lines themselves."""
    from pyspark.sql import functions as F

    parsed = spark.createDataFrame([(line,) for line in lines], "value string")
    parts = F.split("value", " ")
    hits = parsed.select(parts[1].alias("url"), parts[2].cast("int").alias("status"))
    counted = hits.where("status < 400").groupBy("url").agg(F.count("*").alias("hits"))
    return counted.withColumn("hour", F.lit(hour).cast("timestamp"))


def test_happy_path_dependent_job_and_lineage(
    lineage: Lineage, runner: LotRunner, spark: SparkSession
) -> None:
    from pyspark.testing import assertDataFrameEqual

    _ingest_all(lineage)
    summary = _run(runner)
    assert not summary.failed, summary.errors
    assert {j: (t.done, t.failed) for j, t in summary.tallies.items()} == {
        "parse": (4, 0),
        "hourly_counts": (2, 0),
    }
    # Each lot's manifest lists what was written, with Spark's row counts; the empty lot stays empty.
    manifests = {lot: lineage.manifests.current(NS, "hits", lot) for lot in HALF}
    assert [m.row_count if m else None for m in manifests.values()] == [4, 2, 0, 1]
    assert manifests[HALF[2]] is not None
    assert (manifests[HALF[2]].state, manifests[HALF[2]].objects) == (ManifestState.EMPTY, ())
    assert all(o.uri.endswith(".parquet") and o.size > 0 for o in manifests[HALF[0]].objects)  # type: ignore[union-attr]
    # The dependent job read both half hours of each hour and equals plain PySpark.
    first_hour = [line for lot in HALF[:2] for file in LOTS[lot] for line in file]
    assertDataFrameEqual(
        _read(spark, lineage, "hourly_hits", HOUR[:1]),
        _expected_hourly(spark, first_hour, "2023-01-01 00:00:00"),
    )
    # Lineage: one run per lot, inputs pinned to the input lots' versions, the lot's facets.
    runs = lineage.runs.list_runs(NS, "hourly_counts").items
    assert sorted(r.lot for r in runs) == HOUR
    run = next(r for r in runs if r.lot == HOUR[0])
    assert run.state is RunState.COMPLETED
    pinned = {(io.dataset, io.lot): io.version for io in run.inputs}
    assert set(pinned) == {("hits", lot) for lot in HALF[:2]}
    for (dataset, lot), version in pinned.items():
        current = lineage.versions.current_version(NS, dataset, lot)
        assert current is not None
        assert version == current.id
    [output] = run.outputs
    assert (output.dataset, output.lot) == ("hourly_hits", HOUR[0])
    assert run.facets["lotline_lot"]["attempt"] == 1
    assert run.facets["spark_applicationDetails"]["applicationId"] == spark.sparkContext.applicationId
    assert run.facets["lotline_output"]["rowCount"] == 2  # /a and /b
    fields = lineage.catalog.get_dataset(NS, "hourly_hits").fields
    schema = [("url", "string"), ("hits", "bigint"), ("hour", "timestamp")]
    assert [(f.name, f.type) for f in fields] == schema
    job = lineage.catalog.get_job(NS, "hourly_counts")
    assert job.location is not None
    assert job.location.endswith(":hourly_counts")
    graph = {node.key.id for node in lineage.graph.lineage(f"job:{NS}:hourly_counts")}
    assert {f"dataset:{NS}:hits", f"dataset:{NS}:hourly_hits", f"job:{NS}:parse"} <= graph
    # Nothing is left to do: a second run claims nothing.
    again = _run(runner)
    assert sum(t.done for t in again.tallies.values()) == 0


def test_a_failure_is_retried_and_its_objects_are_never_read(
    lineage: Lineage, runner: LotRunner, spark: SparkSession
) -> None:
    # The second, shorter file of the lot fails its first attempt (status 599); with one partition
    # per file and the v2 committer, the first file's part is already in the attempt's folder.
    lots = {
        HALF[0]: [
            ["2023-01-01T00:01:00 /a 200", "2023-01-01T00:02:00 /b 200"],
            ["2023-01-01T00:03:00 /x 599"],
        ]
    }
    _ingest_all(lineage, lots)
    settings = {
        "spark.sql.files.openCostInBytes": str(128 << 20),
        "mapreduce.fileoutputcommitter.algorithm.version": "2",
    }
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        failed = _run(runner)
    finally:
        for key in settings:
            spark.conf.unset(key)
    assert failed.failed
    assert failed.tallies["parse"].failed == 1
    assert "job parse lot 20230101PT30M000 (attempt 1)" in failed.errors[0]
    assert "unparseable line" in failed.errors[0]
    [partial] = lineage.manifests.history(NS, "hits", HALF[0])
    assert partial.state is ManifestState.REMOVED
    assert partial.objects  # the first file's part had been written ...
    assert not any(lineage.storage.exists(o.uri) for o in partial.objects)  # ... and is gone
    assert lineage.manifests.current(NS, "hits", HALF[0]) is None
    [run] = lineage.runs.list_runs(NS, "parse").items
    assert run.state is RunState.FAILED
    assert "unparseable line" in run.facets["errorMessage"]["message"]
    # The rerun (attempt 2 passes the line) publishes a new attempt; downstream reads only it.
    rerun = _run(runner)
    assert not rerun.failed, rerun.errors
    current = lineage.manifests.current(NS, "hits", HALF[0])
    assert current is not None
    assert (current.attempt, current.row_count) == (2, 3)
    assert all("/attempt=2/" in o.uri for o in current.objects)


def test_retries_in_one_run_and_a_lot_left_failed(lineage: Lineage, runner: LotRunner) -> None:
    # No v2 committer here: the failing attempt writes nothing; the retry (attempt 2) succeeds.
    _ingest_all(
        lineage, {HALF[0]: [["2023-01-01T00:03:00 /x 599"]], HALF[1]: [["2023-01-01T00:33:00 /y 599"]]}
    )
    summary = _run(runner, retries=1)
    assert not summary.failed, summary.errors
    assert (summary.tallies["parse"].done, summary.tallies["parse"].retried) == (2, 2)
    assert summary.tallies["hourly_counts"].done == 1


def test_invalidation_recomputes_downstream(lineage: Lineage, runner: LotRunner, spark: SparkSession) -> None:
    from pyspark.testing import assertDataFrameEqual

    _ingest_all(lineage, {lot: LOTS[lot] for lot in HALF[:2]})
    assert not _run(runner).failed
    before = lineage.manifests.current(NS, "hourly_hits", HOUR[0])
    # The sender corrects the first half hour: invalidating it reopens hits and the hour (cascade).
    reopened = lineage.lots.invalidate(NS, "raw_logs", HALF[0])
    assert {(r.name, r.lot) for r in reopened} == {
        ("raw_logs", HALF[0]),
        ("hits", HALF[0]),
        ("hourly_hits", HOUR[0]),
    }
    corrected = [["2023-01-01T00:05:00 /z 200"]]
    ingest(lineage, NS, "raw_logs", HALF[0], corrected)
    summary = _run(runner)
    assert {j: t.done for j, t in summary.tallies.items()} == {"parse": 1, "hourly_counts": 1}
    after = lineage.manifests.current(NS, "hourly_hits", HOUR[0])
    assert before is not None
    assert after is not None
    assert after.version_id != before.version_id
    lines = corrected[0] + LOTS[HALF[1]][0]
    assertDataFrameEqual(
        _read(spark, lineage, "hourly_hits", HOUR[:1]), _expected_hourly(spark, lines, "2023-01-01 00:00:00")
    )
    statuses = {(r.dataset, r.lot): r.status for r in lineage.lots.status(NS, role=Role.OUTPUT)}
    assert statuses[("hits", HALF[1])] is Status.READY  # untouched by the invalidation


def test_a_window_limits_the_lots_run(lineage: Lineage, runner: LotRunner) -> None:
    _ingest_all(lineage, {lot: [] for lot in HALF})  # empty lots: no Spark action at all
    from datetime import UTC, datetime

    window = Window(datetime(2023, 1, 1, 1, tzinfo=UTC), datetime(2023, 1, 1, 2, tzinfo=UTC))
    summary = _run(runner, window=window)
    assert {j: t.done for j, t in summary.tallies.items()} == {"parse": 2, "hourly_counts": 1}
    done = {(r.dataset, r.lot) for r in lineage.lots.status(NS) if r.status is Status.READY}
    assert ("hits", HALF[0]) not in done
    assert ("hourly_hits", HOUR[1]) in done
    assert lineage.manifests.current(NS, "hourly_hits", HOUR[1]).state is ManifestState.EMPTY  # type: ignore[union-attr]


SHORT_LEASE = timedelta(milliseconds=300)


def _revoked(
    lineage: Lineage, spark: SparkSession, lease: timedelta, *hooks: Callable[[Lot], object]
) -> RunSummary:
    """Run the one-job ``revoked`` pipeline on one lot, with ``hooks`` called inside its transform."""
    pipeline = load_pipeline(str(PIPELINES / "revoked.py"))
    register(lineage, pipeline)
    ingest(lineage, "revoked", "events", HALF[0], [["one"], ["two"]])
    pipeline.jobs["copy"].transform.__globals__["ON_TRANSFORM"].extend(hooks)
    runner = LotRunner(lineage, pipeline, spark, lease=lease)
    return run_pipeline(runner, pipeline.ordered_jobs(), worker="test")


def _invalidate(lineage: Lineage) -> Callable[[Lot], object]:
    """An operator invalidates the input while the job works on it: the claim is revoked."""
    return lambda lot: lineage.lots.invalidate("revoked", "events", lot.id)


#: How long a hook waits for the heartbeat to do what it must (never what the test asserts).
HEARTBEAT_DEADLINE_S = 120.0


def _until_the_heartbeat_notices(caplog: pytest.LogCaptureFixture) -> Callable[[Lot], object]:
    """Go on working until the heartbeat has found the claim lost (however long that takes)."""

    def noticed() -> bool:
        return any("no longer a live claim" in r.getMessage() for r in caplog.records)

    return lambda lot: wait_until(
        noticed, timeout=HEARTBEAT_DEADLINE_S, every=0.02, what="the heartbeat to notice the lost claim"
    )


def _three_leases_on(lineage: Lineage, clock: ManualClock, lease: timedelta) -> Callable[[Lot], object]:
    """Work for three leases of the services' clock, half a lease at a time, each step once a
    heartbeat has extended the lease past it: no step depends on a thread getting the CPU in time."""

    def expires() -> datetime | None:
        [row] = [r for r in lineage.lots.status("revoked", job="copy") if r.status is Status.RUNNING]
        return row.lease_expires_at

    def work(_lot: Lot) -> None:
        for _ in range(6):
            wait_until(
                lambda: (expires() or clock.now()) >= clock.now() + lease,
                timeout=HEARTBEAT_DEADLINE_S,
                every=0.02,
                what="a heartbeat",
            )
            clock.advance(lease / 2)

    return work


def test_a_claim_taken_away_mid_lot_commits_nothing(lineage: Lineage, spark: SparkSession) -> None:
    summary = _revoked(lineage, spark, RUNNER_LEASE, _invalidate(lineage))
    [error] = summary.errors
    assert error.startswith(f"job copy lot {HALF[0]} (attempt 1): Cannot complete lot {HALF[0]}")
    assert "is no longer a live claim" in error
    assert lineage.manifests.current("revoked", "copies", HALF[0]) is None
    [run] = lineage.runs.list_runs("revoked", "copy").items
    assert run.state is RunState.FAILED


def test_the_heartbeat_notices_a_lost_claim_before_the_commit(
    lineage: Lineage, spark: SparkSession, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="lotline.spark.heartbeats")
    summary = _revoked(
        lineage, spark, SHORT_LEASE, _invalidate(lineage), _until_the_heartbeat_notices(caplog)
    )
    [error] = summary.errors
    assert f"the claim on lot {HALF[0]} is no longer live (Cannot heartbeat lot {HALF[0]}" in error
    assert lineage.manifests.current("revoked", "copies", HALF[0]) is None


def test_the_heartbeat_keeps_a_lot_longer_than_its_lease(
    backend_url: str, tmp_path: Path, spark: SparkSession
) -> None:
    clock = ManualClock()
    clocked = Lineage.over(Store(backend_url), Storage(str(tmp_path / "warehouse")), clock=clock)
    try:
        summary = _revoked(clocked, spark, SHORT_LEASE, _three_leases_on(clocked, clock, SHORT_LEASE))
        assert not summary.failed, summary.errors
        assert summary.tallies["copy"].done == 1
    finally:
        clocked.close()


def test_worker_threads_share_the_session_and_run_each_lot_once(lineage: Lineage, runner: LotRunner) -> None:
    _ingest_all(lineage)
    summary = _run(runner, workers=2)
    assert not summary.failed, summary.errors
    assert {j: t.done for j, t in summary.tallies.items()} == {"parse": 4, "hourly_counts": 2}
    runs = lineage.runs.list_runs(NS, "parse").items
    assert sorted(r.lot for r in runs) == HALF
    assert {r.state for r in runs} == {RunState.COMPLETED}
    owners = {r.facets["lotline_lot"]["worker"] for r in runs}
    assert owners <= {"test-0", "test-1"}


def test_a_code_change_is_a_new_job_version(lineage: Lineage, spark: SparkSession, tmp_path: Path) -> None:
    register(lineage, load_pipeline(str(PIPELINES / "weblogs.py")))
    register(lineage, load_pipeline(str(PIPELINES / "weblogs.py")))  # the same code: the same version
    first = lineage.catalog.get_job(NS, "hourly_counts").current_version
    edited = tmp_path / "weblogs.py"
    source = (PIPELINES / "weblogs.py").read_text()
    edited.write_text(source.replace('F.col("status") < 400', 'F.col("status") < 300'))
    pipeline = load_pipeline(str(edited))
    register(lineage, pipeline)
    second = lineage.catalog.get_job(NS, "hourly_counts").current_version
    assert {v.id for v in lineage.catalog.list_job_versions(NS, "hourly_counts").items} == {first, second}
    assert lineage.catalog.list_job_versions(NS, "parse").total_count == 1  # parse did not change
    # Runs record the version they ran (empty lots: no Spark job needed).
    _ingest_all(lineage, {lot: [] for lot in HALF[:2]})
    assert not run_pipeline(LotRunner(lineage, pipeline, spark), pipeline.ordered_jobs(), worker="t").failed
    [run] = lineage.runs.list_runs(NS, "hourly_counts").items
    assert run.job_version == second


def test_a_missing_input_file_fails_the_lot_with_a_message_naming_it(
    lineage: Lineage, runner: LotRunner
) -> None:
    """Issue 29.12: the failure of a lot whose input object is gone says which object (Spark's
    PATH_NOT_FOUND names it); the run's errorMessage is not an empty ``AnalysisException: ``."""
    _ingest_all(lineage, {HALF[0]: LOTS[HALF[0]]})
    manifest = lineage.manifests.current(NS, "raw_logs", HALF[0])
    assert manifest is not None
    gone = manifest.objects[0].uri
    Path(lineage.storage.local_path(gone)).unlink()
    summary = _run(runner)
    [error] = summary.errors
    path = lineage.storage.local_path(gone)
    assert error.startswith(f"job parse lot {HALF[0]} (attempt 1): ") and path in error, error
    [run] = lineage.runs.list_runs(NS, "parse").items
    message = run.facets["errorMessage"]["message"]
    assert path in message and not message.rstrip().endswith(":"), message
