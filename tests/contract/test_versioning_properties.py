"""Random run histories keep SPEC §3's invariants, on both databases.

Hypothesis draws sequences of runs of a two-job chain (load -> events -> rollup -> daily) over a
few lots and outcomes. After every step the store is checked against what was observed, not
against a second implementation of the rules.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lotline.domain.model import DatasetRef, DatasetVersion
from lotline.domain.runs import RunAction
from lotline.services import Lineage
from support.databases import empty_database

NS = "props"
LOTS = (None, "2023-01-01", "2023-01-02")
OUTCOMES = ("complete", "fail", "abort", "abort-before-start")
RULE_ONE = -1  # marks an input expected to get a version by SPEC §3 rule 1
JOBS = {"load": ((), ("events",)), "rollup": (("events",), ("daily",))}


@dataclass(frozen=True)
class Step:
    job: str
    lot: str | None
    outcome: str


steps = st.lists(
    st.builds(Step, st.sampled_from(sorted(JOBS)), st.sampled_from(LOTS), st.sampled_from(OUTCOMES)),
    min_size=1,
    max_size=12,
)


def _versions(lineage: Lineage, dataset: str) -> list[DatasetVersion]:
    return list(lineage.versions.list_versions(NS, dataset, limit=1000).items)


def _check_invariants(lineage: Lineage, ran: dict[uuid.UUID, str]) -> None:
    for dataset in ("events", "daily"):
        versions = _versions(lineage, dataset)
        assert sorted(v.number for v in versions) == list(range(1, len(versions) + 1))  # no gaps, no repeats
        by_lot: dict[str | None, list[DatasetVersion]] = defaultdict(list)
        for v in versions:
            by_lot[v.lot].append(v)
        for lot, in_lot in by_lot.items():
            succeeded = [v for v in in_lot if v.state.value != "failed"]
            current = [v for v in in_lot if v.state.value == "current"]
            expected = [max(succeeded, key=lambda v: v.number)] if succeeded else []
            assert current == expected, f"{dataset}/{lot}: the latest successful version is the current one"
            if lot is not None:
                assert lineage.versions.current_version(NS, dataset, lot) == (
                    expected[0] if expected else None
                )
        all_current = [v for v in versions if v.state.value == "current"]
        dataset_current = lineage.versions.current_version(NS, dataset)
        assert dataset_current == (max(all_current, key=lambda v: v.number) if all_current else None)
        for v in versions:
            if v.run_id is not None:
                outcome = ran[v.run_id]
                assert outcome != "abort-before-start"  # a run that never started wrote nothing
                assert (v.state.value == "failed") == (outcome != "complete")


def _run_step(lineage: Lineage, step: Step, ran: dict[uuid.UUID, str], pins: dict[uuid.UUID, object]) -> None:
    run = lineage.runs.create_run(NS, step.job, lot=step.lot)
    ran[run.id] = step.outcome
    if step.outcome == "abort-before-start":
        lineage.runs.transition(run.id, RunAction.ABORT)
        return
    inputs, _ = JOBS[step.job]
    expected_pins: dict[str, int | None] = {}
    for dataset in inputs:
        in_scope = [v for v in _versions(lineage, dataset) if v.lot == step.lot]
        current = [v.number for v in in_scope if v.state.value == "current"]
        # no version at all: rule 1 creates one; only failed ones: nothing readable, stays unpinned
        expected_pins[dataset] = current[0] if current else (None if in_scope else RULE_ONE)
    started = lineage.runs.transition(run.id, RunAction.START)
    assert sorted(io.dataset for io in started.inputs) == sorted(inputs)
    for io in started.inputs:
        expected = expected_pins[io.dataset]
        if expected == RULE_ONE:
            version = next(v for v in _versions(lineage, io.dataset) if v.id == io.version)
            assert (version.run_id, version.state.value, version.lot) == (None, "current", step.lot)
        else:
            assert io.version_number == expected
    pins[run.id] = started.inputs
    action = {"complete": RunAction.COMPLETE, "fail": RunAction.FAIL, "abort": RunAction.ABORT}[step.outcome]
    ended = lineage.runs.transition(run.id, action)
    assert ended.inputs == pins[run.id]  # pinned inputs never change
    assert len(ended.outputs) == 1 and ended.outputs[0].version is not None  # exactly one version per output


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=steps)
def test_random_histories_keep_the_versioning_invariants(
    backend: str, history: list[Step], request: pytest.FixtureRequest
) -> None:
    with empty_database(request, backend) as lineage:
        lineage.catalog.upsert_namespace(NS)
        for job, (inputs, outputs) in JOBS.items():
            for name in (*inputs, *outputs):
                lineage.catalog.upsert_dataset(NS, name)
            lineage.catalog.upsert_job(
                NS,
                job,
                inputs=[DatasetRef(NS, d) for d in inputs],
                outputs=[DatasetRef(NS, d) for d in outputs],
            )
        ran: dict[uuid.UUID, str] = {}
        pins: dict[uuid.UUID, object] = {}
        for step in history:
            _run_step(lineage, step, ran, pins)
            _check_invariants(lineage, ran)
        for run_id, inputs in pins.items():
            assert lineage.runs.get_run(run_id).inputs == inputs  # still pinned at the end
