"""Jobs with several outputs (issue 30 §2): one transform, two output datasets, each lot published
for both in one transaction or for neither — in process (a reader in Spark's Python worker looks
between the two writes) and under SIGKILL of a real ``lotline run``; bad declarations and results
refused with one line."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fastapi.testclient import TestClient

from lotline.api.app import create_app
from lotline.domain.coordination import Status
from lotline.domain.errors import InvalidInput
from lotline.domain.manifests import LotEventKind
from lotline.domain.model import DatasetRef
from lotline.domain.runs import RunState
from lotline.services import Lineage
from lotline.services.config import Settings
from lotline.spark.pipeline import Lot, Pipeline, PipelineError, expect, load_pipeline
from lotline.spark.registration import register
from lotline.spark.runner import LotRunner
from support import several_outputs
from support.several_outputs import CHECKED, CHECKED_NS, LOT
from support.spark import PIPELINES, ingest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NS = "multiout"
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
    several_outputs.killed_between_writes(backend_url, tmp_path, "local[1]")


def test_checks_per_output_gate_each_output_and_a_failure_publishes_none(
    lineage: Lineage, spark: SparkSession, backend_url: str, tmp_path: Path
) -> None:
    observed = several_outputs.checked_outputs(lineage, spark)
    assert sorted(load_pipeline(str(CHECKED)).jobs) == ["pair", "parted", "sizes", "sizes__quarantine"]

    # fail on pair's second output: neither output is published, every attempt's objects removed.
    reason = "output second: check n < 100 failed: 1 of 3 rows"
    assert observed["errors"] == [f"job pair lot {LOT} (attempt 1): {reason}"]
    for dataset in ("first", "second"):
        assert observed["failed"][dataset] == {"readable": [], "status": ["ERROR", reason], "left": []}

    # drop on each of sizes' outputs (each into its own quarantine), warn on high only.
    assert observed["rows"] == {
        "low": [[1]],
        "high": [[500]],
        "low__quarantine": [[None, "n IS NOT NULL"]],
        "high__quarantine": [[20, "n <> 20"]],
    }
    assert observed["quarantine"] == {
        "inputs": ["numbers"],
        "outputs": ["high__quarantine", "low__quarantine"],
    }
    assert observed["done"] == {"sizes": 1, "sizes__quarantine": 1}

    # Each output's version carries its own checks' results; only high's is marked as warned.
    facets = observed["facets"]
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
    assert [facets[d]["warned"] for d in ("low", "high")] == [False, True]
    checks = observed["checks"]
    assert [(r["dataset"], r["check"]) for r in checks["results"]] == [
        ("low", "n IS NOT NULL"),
        ("high", "n < 100"),
        ("high", "n <> 20"),
    ]
    assert checks["outputs"] == {"low": {"rows": 2, "dropped": 1}, "high": {"rows": 2, "dropped": 1}}
    assert checks["warnings"] == ["n < 100"]

    # The run page shows each result with its output, and the dropped rows by output.
    [run] = lineage.lots.status(CHECKED_NS, dataset="low")
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
    observed = several_outputs.retried_part(lineage, spark)
    ok, error = observed["failed"]
    assert not ok and "1 of 2 parts failed" in error
    assert observed["readable"] == {"evens": [], "odds": []}  # nothing of the failed lot is readable

    assert observed["retry"] == [2, True]
    assert observed["parts"] == {"kept": ["part=00000"], "ran": ["part=00001"], "failed": []}
    for dataset, count in (("evens", 2), ("odds", 3)):
        assert observed["published"][dataset] == {
            "rows": count,
            "read": count,
            "places": ["1/part=00000", "2/part=00001"],  # the kept part is not redone
        }
    assert observed["kept"] == {"evens": [[1, "complete"]], "odds": [[1, "complete"]]}
    assert observed["kept untouched"]  # the same objects, sizes and times as before the retry
