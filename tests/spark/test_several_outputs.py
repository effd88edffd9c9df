"""Jobs with several outputs (issue 30 §2): one transform, two output datasets, each lot published
for both in one transaction or for neither — in process (a reader in Spark's Python worker looks
between the two writes) and under SIGKILL of a real ``lotline run``; bad declarations and results
refused with one line."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fastapi.testclient import TestClient

from lotline.api.app import create_app
from lotline.domain.checks import published_with_warnings
from lotline.domain.coordination import Status
from lotline.domain.errors import InvalidInput
from lotline.domain.manifests import LotEventKind
from lotline.domain.model import DatasetRef
from lotline.domain.runs import RunState
from lotline.services import Lineage
from lotline.services.config import Settings
from lotline.spark.pipeline import Lot, Pipeline, PipelineError, expect, load_pipeline
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner, register
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.polling import wait_until
from support.spark import PIPELINES, ingest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NS = "multiout"
LOT = "20230101PT1H000"
FILE = PIPELINES / "multiout.py"


def _statuses(lineage: Lineage, dataset: str) -> list[tuple[str, Status]]:
    return [(s.lot, s.status) for s in lineage.lots.status(NS, dataset=dataset)]


def test_both_outputs_are_published_together_or_neither_is(
    lineage: Lineage, backend_url: str, spark: SparkSession, tmp_path: Path
) -> None:
    pipeline = load_pipeline(str(FILE))
    register(lineage, pipeline)
    ingest(lineage, NS, "numbers", LOT, [["1", "-3"], ["2"]])
    module = sys.modules[pipeline.jobs["split"].transform.__module__]
    probe = tmp_path / "probe.json"
    module.PROBE = {"url": backend_url, "out": str(probe), "lot": LOT}
    runner = LotRunner(lineage, pipeline, spark)
    split = pipeline.jobs["split"]
    try:
        claim = runner.claim("w", split)
        assert claim is not None
        failed = runner.execute(split, claim)
    finally:
        module.PROBE = None

    # Between the two writes, a reader in another process saw nothing of the first output.
    assert json.loads(probe.read_text()) == {"readable": [], "status": "RUNNING"}
    assert not failed.ok and (failed.reason or "").startswith(
        "ValueError: rejected output refused between the writes (multiout.py line"
    )
    storage = lineage.storage
    for dataset in ("kept", "rejected"):
        assert lineage.manifests.readable(NS, dataset, [LOT]) == {}
        assert _statuses(lineage, dataset) == [(LOT, Status.ERROR)]
        assert list(storage.objects_under(storage.attempt_uri(NS, dataset, LOT, 1))) == []  # removed
        [event] = lineage.lot_events.of_lot(NS, dataset, LOT)
        assert (event.kind, event.attempt) == (LotEventKind.FAILED, 1)

    # The retry publishes both: a manifest and a version each, one run with both outputs.
    lineage.lots.retry_now(NS, "split")  # no back-off, as `lotline run` asks
    claim = runner.claim("w", split)
    assert claim is not None and claim.attempt == 2
    assert runner.execute(split, claim).ok
    kept = lineage.manifests.readable(NS, "kept", [LOT])[LOT]
    rejected = lineage.manifests.readable(NS, "rejected", [LOT])[LOT]
    assert (kept.row_count, rejected.row_count) == (2, 1)
    assert kept.location.endswith("/attempt=2") and rejected.location.endswith("/attempt=2")
    assert kept.version_id != rejected.version_id
    run = lineage.runs.get_run(claim.run_id)
    assert run.state is RunState.COMPLETED
    versions = {o.dataset: (o.version, o.version_number) for o in run.outputs}
    assert versions == {
        "kept": (kept.version_id, kept.version_number),
        "rejected": (rejected.version_id, rejected.version_number),
    }
    edges = {
        e.destination
        for e in next(
            n for n in lineage.graph.lineage(f"job:{NS}:split", 1) if n.key.id == f"job:{NS}:split"
        ).out_edges
    }
    assert edges == {f"dataset:{NS}:kept", f"dataset:{NS}:rejected"}
    events = lineage.openlineage.list_events(job_namespace=NS, limit=100, sort_direction="asc").items
    [complete] = [
        e for e in events if e["eventType"] == "COMPLETE" and e["run"]["runId"] == str(claim.run_id)
    ]
    assert [o["name"] for o in complete["outputs"]] == ["kept", "rejected"]
    assert all("outputStatistics" in o["outputFacets"] for o in complete["outputs"])

    # The second output is another job's input; invalidating the first output reopens the second
    # (they are made together) and what was made from it.
    tally = pipeline.jobs["count_rejected"]
    claim = runner.claim("w", tally)
    assert claim is not None and runner.execute(tally, claim).ok
    reopened = lineage.lots.invalidate(NS, "kept", LOT)
    assert sorted(r.name for r in reopened) == ["kept", "rejected", "tally"]
    assert all(r == DatasetRef(NS, r.name, LOT) for r in reopened)
    for dataset in ("kept", "rejected", "tally"):
        assert _statuses(lineage, dataset) == [(LOT, Status.RESUBMIT)]
    claim = runner.claim("w", split)
    assert claim is not None and claim.attempt == 3 and runner.execute(split, claim).ok
    assert _statuses(lineage, "rejected") == [(LOT, Status.READY)]

    # Child work: each part (one object of the input) is a child run writing both outputs; each
    # output's manifest lists both parts' objects.
    parity = pipeline.jobs["parity"]
    claim = runner.claim("w", parity)
    assert claim is not None and runner.execute(parity, claim).ok
    for dataset, rows in (("evens", 1), ("odds", 2)):
        manifest = lineage.manifests.readable(NS, dataset, [LOT])[LOT]
        assert manifest.row_count == rows
        assert {o.uri.split("/attempt=1/")[1].split("/")[0] for o in manifest.objects} == {
            "part=00000",
            "part=00001",
        }


def test_bad_declarations_and_results_are_refused_in_one_line(spark: SparkSession) -> None:
    p = Pipeline("bad")
    a = p.dataset("a", format="text", interval="PT1H")
    b = p.dataset("b", format="parquet", interval="PT1H")
    c = p.dataset("c", format="parquet", interval="PT1H")
    day = p.dataset("day", format="parquet", interval="P1D")

    def make(a: object) -> object:
        return a

    refused = {
        "declare output= (one output) or outputs= (several), not both": {"output": b, "outputs": [c]},
        "lists an output twice": {"outputs": [b, b]},
        "dataset a is both an input and an output": {"outputs": [b, a]},
        "its outputs share its lots, but day has P1D and b PT1H": {"outputs": [b, day]},
        "outputs= is a non-empty list of datasets": {"outputs": []},
    }
    for message, declared in refused.items():
        with pytest.raises(PipelineError, match=re.escape(message)) as error:
            p.job(inputs=[a], **declared)(make)  # type: ignore[arg-type]
        assert "\n" not in error.value.message
    assert p.jobs == {}  # nothing was declared
    p.job(inputs=[a], outputs=[b, c])(make)  # type: ignore[arg-type]
    with pytest.raises(PipelineError, match="dataset c is already produced by job make"):
        p.job(inputs=[a], outputs=[day, c], name="other")(make)  # type: ignore[arg-type]
    assert list(p.jobs) == ["make"]

    job = p.jobs["make"]
    frame = spark.range(1)
    lot = Lot(LOT, None, None, (), None, 1, spark, None)  # type: ignore[arg-type]
    results = {
        "returned no DataFrame for output c": {"b": frame},
        "returned undeclared output x": {"b": frame, "c": frame, "x": frame},
        "output c is int, not a DataFrame": {"b": frame, "c": 3},
        "returned a tuple of 1, not one DataFrame per output": (frame,),
        "returned DataFrame, not a dict of DataFrames by output": frame,
    }
    for message, result in results.items():
        with pytest.raises(InvalidInput, match=re.escape(message)):
            job.call({"a": result}, lot)  # type: ignore[dict-item]
    assert list(job.call({"a": (frame, frame)}, lot)) == ["b", "c"]  # a tuple, in declared order  # type: ignore[dict-item]


# Two `lotline run` processes (a JVM each): on PostgreSQL only, where workers run in production;
# the store's side is proven on both databases above.
@pytest.mark.parametrize(
    "backend_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)
@pytest.mark.slow
def test_a_run_killed_between_the_two_writes_publishes_nothing_and_its_retry_both(
    backend_url: str, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    with Lineage.over(Store(backend_url), Storage(str(warehouse))) as lineage:
        register(lineage, load_pipeline(str(FILE)))
        ingest(lineage, NS, "numbers", LOT, [["1", "-2"]])
        env = {
            **os.environ,
            "LOTLINE_DB_URL": backend_url,
            "LOTLINE_WAREHOUSE": str(warehouse),
            "LOTLINE_SPARK_MASTER": "local[1]",
        }
        command = [sys.executable, "-m", "lotline", "run", str(FILE), "--job", "split", "--lease", "2"]
        killed = subprocess.run(
            command,
            check=False,
            env={**env, "MULTIOUT_KILL": "1"},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        # Killed while writing the second output, after the first: nothing is readable.
        assert list(lineage.storage.objects_under(lineage.storage.attempt_uri(NS, "kept", LOT, 1))) != []
        for dataset in ("kept", "rejected"):
            assert lineage.manifests.readable(NS, dataset, [LOT]) == {}
            [status] = lineage.lots.status(NS, dataset=dataset)
            assert status.status is Status.RUNNING and status.lease_expires_at is not None
        expires = status.lease_expires_at
        wait_until(lambda: datetime.now(UTC) > expires, timeout=60, what="the killed lease to expire")

        again = subprocess.run(
            command, check=False, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        assert again.returncode == 0, again.stderr[-2000:]
        for dataset, rows in (("kept", 1), ("rejected", 1)):
            manifest = lineage.manifests.readable(NS, dataset, [LOT])[LOT]
            assert manifest.attempt == 2 and manifest.row_count == rows
        runs = sorted(lineage.runs.list_runs(NS, "split").items, key=lambda r: r.created_at)
        assert [r.state for r in runs] == [RunState.FAILED, RunState.COMPLETED]


CHECKED = PIPELINES / "multichecked.py"
CHECKED_NS = "multichecked"


def test_checks_per_output_gate_each_output_and_a_failure_publishes_none(
    lineage: Lineage, spark: SparkSession, backend_url: str, tmp_path: Path
) -> None:
    pipeline = load_pipeline(str(CHECKED))
    assert sorted(pipeline.jobs) == ["pair", "parted", "sizes", "sizes__quarantine"]
    register(lineage, pipeline)
    ingest(lineage, CHECKED_NS, "numbers", LOT, [["1", "x", "500", "20"]])
    runner = LotRunner(lineage, pipeline, spark)
    summary = run_pipeline(runner, pipeline.select(["pair", "sizes", "sizes__quarantine"]), worker="t")

    # fail on pair's second output: neither output is published, every attempt's objects removed.
    reason = "output second: check n < 100 failed: 1 of 3 rows"
    assert summary.errors == [f"job pair lot {LOT} (attempt 1): {reason}"]
    storage = lineage.storage
    for dataset in ("first", "second"):
        assert lineage.manifests.readable(CHECKED_NS, dataset, [LOT]) == {}
        [status] = lineage.lots.status(CHECKED_NS, dataset=dataset)
        assert (status.status, status.error) == (Status.ERROR, reason)
        assert list(storage.objects_under(storage.attempt_uri(CHECKED_NS, dataset, LOT, 1))) == []

    # drop on each of sizes' outputs (each into its own quarantine), warn on high only.
    def rows(dataset: str) -> list[tuple[object, ...]]:
        manifest = lineage.manifests.readable(CHECKED_NS, dataset, [LOT])[LOT]
        return sorted(tuple(r) for r in spark.read.parquet(*[o.uri for o in manifest.objects]).collect())

    assert rows("low") == [(1,)] and rows("high") == [(500,)]
    assert rows("low__quarantine") == [(None, "n IS NOT NULL")]
    assert rows("high__quarantine") == [(20, "n <> 20")]
    quarantine = lineage.catalog.get_job(CHECKED_NS, "sizes__quarantine")
    assert sorted(d.name for d in quarantine.outputs) == ["high__quarantine", "low__quarantine"]
    assert [d.name for d in quarantine.inputs] == ["numbers"]
    assert summary.tallies["sizes"].done == 1 and summary.tallies["sizes__quarantine"].done == 1

    # Each output's version carries its own checks' results; only high's is marked as warned.
    versions = {d: lineage.versions.current_version(CHECKED_NS, d, LOT) for d in ("low", "high")}
    facets = {d: v.facets if v is not None else {} for d, v in versions.items()}
    assertions = {
        d: {a["assertion"]: (a["success"], a["severity"]) for a in f["dataQualityAssertions"]["assertions"]}
        for d, f in facets.items()
    }
    assert assertions == {
        "low": {"n IS NOT NULL": (False, "drop")},
        "high": {"n < 100": (False, "warn"), "n <> 20": (False, "drop")},
    }
    assert facets["low"]["dataQualityMetrics"]["rowCount"] == 2
    assert facets["low"]["dataQualityMetrics"]["columnMetrics"]["n"]["nullCount"] == 1
    assert facets["high"]["dataQualityMetrics"]["rowCount"] == 2
    assert [published_with_warnings(facets[d]) for d in ("low", "high")] == [False, True]
    [run] = lineage.lots.status(CHECKED_NS, dataset="low")
    checks = lineage.runs.get_run(run.run_id).facets["lotline_checks"]
    assert [(r["dataset"], r["check"]) for r in checks["results"]] == [
        ("low", "n IS NOT NULL"),
        ("high", "n < 100"),
        ("high", "n <> 20"),
    ]
    assert checks["outputs"] == {"low": {"rows": 2, "dropped": 1}, "high": {"rows": 2, "dropped": 1}}
    assert checks["warnings"] == ["n < 100"]

    # The run page shows each result with its output, and the dropped rows by output.
    app = create_app(Settings(db_url=backend_url, warehouse=str(tmp_path / "warehouse"), api_token=None))
    app.state.lineage = lineage
    page = TestClient(app, base_url="http://127.0.0.1").get(f"/runs/{run.run_id}").text
    assert "low:</span> <code>n IS NOT NULL</code>" in page
    assert "high: 1 of 2 rows dropped into the quarantine dataset" in page


def test_checks_per_output_refused_at_load_declare_nothing() -> None:
    p = Pipeline("bad")
    a = p.dataset("a", format="text", interval="PT1H")
    b = p.dataset("b", format="parquet", interval="PT1H")
    c = p.dataset("c", format="parquet", interval="PT1H")
    datasets = dict(p.datasets)

    def make(a: object) -> object:
        return a

    refused = {
        "job make: a job with several outputs takes its checks by output "
        "(checks={'b': [expect(...)], ...}), not a list.": [expect("n > 0")],
        "job make: checks are keyed by output, and a is not an output of the job (outputs: b, c).": {
            a: [expect("n > 0")]
        },
        "job make output c: check n > 0 is declared twice.": {"c": [expect("n > 0"), expect("n > 0")]},
    }
    for message, checks in refused.items():
        with pytest.raises(PipelineError) as error:
            p.job(inputs=[a], outputs=[b, c], checks=checks)(make)  # type: ignore[arg-type]
        assert error.value.message == message
    assert p.jobs == {} and p.datasets == datasets  # nothing was declared
    p.job(inputs=[a], outputs=[b, c], checks={c: [expect("n > 0", on_fail="drop")]})(make)  # type: ignore[arg-type]
    assert sorted(p.jobs) == ["make", "make__quarantine"] and "c__quarantine" in p.datasets
    digest = p.jobs["make"].code_digest
    changed = {"c": (expect("n > 1", on_fail="drop"),)}
    assert replace(p.jobs["make"], checks=changed).code_digest != digest  # checks enter the version


def test_a_retry_of_child_work_with_two_outputs_runs_only_the_failed_part(
    lineage: Lineage, spark: SparkSession
) -> None:
    pipeline = load_pipeline(str(CHECKED))
    register(lineage, pipeline)
    ingest(lineage, CHECKED_NS, "numbers", LOT, [["1", "2"], ["3", "4", "5"]])
    module = sys.modules[pipeline.jobs["parted"].transform.__module__]
    runner = LotRunner(lineage, pipeline, spark)
    parted = pipeline.jobs["parted"]
    module.FAIL_PART = "part=00001"
    try:
        claim = runner.claim("w", parted)
        assert claim is not None
        failed = runner.execute(parted, claim)
    finally:
        module.FAIL_PART = None
    assert not failed.ok and "1 of 2 parts failed" in (failed.error or "")
    for dataset in ("evens", "odds"):
        assert lineage.manifests.readable(CHECKED_NS, dataset, [LOT]) == {}

    lineage.lots.retry_now(CHECKED_NS, "parted")
    claim = runner.claim("w", parted)
    assert claim is not None and claim.attempt == 2
    assert runner.execute(parted, claim).ok
    parts = lineage.runs.get_run(claim.run_id).facets["lotline_parts"]
    assert (parts["kept"], parts["ran"], parts["failed"]) == (["part=00000"], ["part=00001"], [])
    for dataset, count in (("evens", 2), ("odds", 3)):
        manifest = lineage.manifests.readable(CHECKED_NS, dataset, [LOT])[LOT]
        assert manifest.row_count == count
        read = spark.read.parquet(*[o.uri for o in manifest.objects]).count()
        assert read == count
        places = {tuple(o.uri.split("/attempt=")[1].split("/")[:2]) for o in manifest.objects}
        assert places == {("1", "part=00000"), ("2", "part=00001")}  # the kept part is not redone
