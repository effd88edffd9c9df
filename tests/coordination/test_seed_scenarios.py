"""Seed 002's scenarios, step by step, on SQLite and PostgreSQL.

Names follow the seed: JobA produces DataA (a source: it is invoked with a named lot, ``1``),
JobB reads DataA and produces DataB. Each assertion is the seed's sentence about the status table.
"""

from __future__ import annotations

from lotline.domain.clock import ManualClock
from lotline.domain.coordination import FIRST_RETRY, ArcState, Role
from lotline.domain.runs import RunState
from lotline.domain.versions import VersionState
from support.lots import LotWorld


def _chain(world: LotWorld) -> None:
    world.job("JobA", output="DataA")
    world.job("JobB", inputs=["DataA"], output="DataB")


def test_scenario_1_happy_path(world: LotWorld) -> None:
    world.job("ingest", output="DataA")
    world.job("jobA", inputs=["DataA"], output="DataB")
    world.produce("ingest", "1")
    # The framework finds DataA/1 READY, no lock on DataB/1, no job-local lock on DataA/1 for jobA.
    claim = world.claim("jobA")
    assert claim is not None
    assert (claim.lot, claim.input_lots, claim.attempt) == ("1", (("DataA", "1"),), 1)
    assert world.status("DataB", "1", "jobA") == "RUNNING"
    assert world.status("DataA", "1", "jobA", role=Role.INPUT) == "RUNNING"
    world.lots.complete(claim)
    assert world.status("DataB", "1", "jobA") == "READY"
    assert world.status("DataA", "1", "jobA", role=Role.INPUT) == "DONE"
    # jobA will not run again on the same data.
    assert world.claim("jobA") is None
    run = world.lineage.runs.get_run(claim.run_id)
    assert run.state is RunState.COMPLETED
    assert world.current_version_run("DataB", "1") == claim.run_id


def test_scenario_1_failure_allows_a_rerun_and_blocks_downstream(
    timed_world: LotWorld, clock: ManualClock
) -> None:
    world = timed_world
    world.job("ingest", output="DataA")
    world.job("jobA", inputs=["DataA"], output="DataB")
    world.job("down", inputs=["DataB"], output="DataC")
    world.produce("ingest", "1")
    claim = world.claim("jobA")
    assert claim is not None
    world.lots.fail(claim)
    assert world.status("DataB", "1", "jobA") == "ERROR"
    assert world.status("DataA", "1", "jobA", role=Role.INPUT) == "ERROR"
    assert world.claim("down") is None  # downstream does not run on failed data
    assert world.claim("jobA") is None  # the retry waits for its back-off
    clock.advance(FIRST_RETRY)
    again = world.claim("jobA")
    assert again is not None
    assert (again.lot, again.attempt) == ("1", 2)


def test_scenario_dependent_job(world: LotWorld) -> None:
    _chain(world)
    # JobA invoked with dataid 1 adds its OUTPUT row RUNNING; JobB cannot read it yet.
    job_a = world.claim("JobA", "1")
    assert job_a is not None
    assert world.status("DataA", "1", "JobA") == "RUNNING"
    assert world.claim("JobB") is None
    world.lots.complete(job_a)
    assert world.status("DataA", "1", "JobA") == "READY"
    # JobB discovers DataA/1 from the status table and takes it.
    job_b = world.claim("JobB", worker="b-1")
    assert job_b is not None
    assert job_b.lot == "1"
    assert world.status("DataA", "1", "JobB", role=Role.INPUT) == "RUNNING"
    assert world.status("DataB", "1", "JobB") == "RUNNING"
    # Another JobB worker skips DataA/1 (job-local read lock) and finds the next lot.
    assert world.claim("JobB", worker="b-2") is None
    world.produce("JobA", "2")
    other = world.claim("JobB", worker="b-2")
    assert other is not None
    assert other.lot == "2"


def test_scenario_1_job_b_succeeds(world: LotWorld) -> None:
    _chain(world)
    world.produce("JobA", "1")
    job_b = world.claim("JobB")
    assert job_b is not None
    world.lots.complete(job_b)
    assert world.status("DataA", "1", "JobB", role=Role.INPUT) == "DONE"  # job-local lock retained
    assert world.status("DataB", "1", "JobB") == "READY"  # downstream may consume
    assert world.claim("JobB") is None
    assert world.lots.arc_state(world.ns, "JobB", "1") is ArcState.COMPLETE


def test_scenario_2_job_b_fails_then_reruns(timed_world: LotWorld, clock: ManualClock) -> None:
    world = timed_world
    _chain(world)
    world.produce("JobA", "1")
    first = world.claim("JobB")
    assert first is not None
    world.lots.fail(first)
    assert world.status("DataA", "1", "JobB", role=Role.INPUT) == "ERROR"  # lock released
    assert world.status("DataB", "1", "JobB") == "ERROR"  # downstream blocked
    assert world.lots.arc_state(world.ns, "JobB", "1") is ArcState.PARTIAL
    failed = world.lineage.versions.list_versions(world.ns, "DataB", lot="1").items
    assert [v.state for v in failed] == [VersionState.FAILED]
    # On resubmit (after the back-off) the framework finds DataA/1 READY and JobB's input row ERROR:
    # it reruns.
    clock.advance(FIRST_RETRY)
    rerun = world.claim("JobB")
    assert rerun is not None
    assert (rerun.lot, rerun.attempt) == ("1", 2)
    world.lots.complete(rerun)
    assert world.status("DataB", "1", "JobB") == "READY"
    assert world.current_version_run("DataB", "1") == rerun.run_id
    states = {world.lineage.runs.get_run(c.run_id).state for c in (first, rerun)}
    assert states == {RunState.FAILED, RunState.COMPLETED}


def test_scenario_3_previous_job_failed_undetected(world: LotWorld) -> None:
    _chain(world)
    world.produce("JobA", "1")
    job_b = world.claim("JobB")
    assert job_b is not None
    world.lots.fail(job_b)
    # On investigation JobA's data was invalid: the operator reruns DataA/1.
    reopened = world.lots.invalidate(world.ns, "DataA", "1")
    assert [(r.name, r.lot) for r in reopened] == [("DataA", "1")]
    assert world.status("DataA", "1", "JobA") == "RESUBMIT"
    # JobB is in ERROR: its job-local lock was already released and stays so.
    assert world.status("DataA", "1", "JobB", role=Role.INPUT) == "ERROR"
    assert world.status("DataB", "1", "JobB") == "ERROR"
    assert world.claim("JobB") is None  # DataA/1 is not READY: JobB waits for JobA
    # Runs redo the lot in dependency order.
    world.produce("JobA", "1")
    again = world.claim("JobB")
    assert again is not None
    world.lots.complete(again)
    assert world.status("DataB", "1", "JobB") == "READY"
    versions = world.lineage.versions.list_versions(world.ns, "DataA", lot="1").items
    assert [v.state for v in versions] == [VersionState.CURRENT, VersionState.SUPERSEDED]


def test_scenario_3_invalidation_cascades_transitively(world: LotWorld) -> None:
    _chain(world)
    world.job("JobC", inputs=["DataB"], output="DataC")
    world.produce("JobA", "1", "2")
    for job in ("JobB", "JobB", "JobC", "JobC"):
        claim = world.claim(job)
        assert claim is not None
        world.lots.complete(claim)
    reopened = world.lots.invalidate(world.ns, "DataA", "1")
    assert [(r.name, r.lot) for r in reopened] == [("DataA", "1"), ("DataB", "1"), ("DataC", "1")]
    assert world.table() == {
        ("DataA", "1", "JobA", "OUTPUT", "RESUBMIT"),
        ("DataA", "1", "JobB", "INPUT", "ERROR"),
        ("DataB", "1", "JobB", "OUTPUT", "RESUBMIT"),
        ("DataB", "1", "JobC", "INPUT", "ERROR"),
        ("DataC", "1", "JobC", "OUTPUT", "RESUBMIT"),
        # lot 2 is untouched
        ("DataA", "2", "JobA", "OUTPUT", "READY"),
        ("DataA", "2", "JobB", "INPUT", "DONE"),
        ("DataB", "2", "JobB", "OUTPUT", "READY"),
        ("DataB", "2", "JobC", "INPUT", "DONE"),
        ("DataC", "2", "JobC", "OUTPUT", "READY"),
    }
    for dataset, job in (("DataA", "JobA"), ("DataB", "JobB"), ("DataC", "JobC")):
        assert world.lineage.versions.current_version(world.ns, dataset, "1") is None
        assert world.lots.arc_state(world.ns, job, "1") is ArcState.MISSING
    # Downstream waits until upstream is READY again; then everything is redone in order.
    assert world.claim("JobB") is None
    assert world.claim("JobC") is None
    world.produce("JobA", "1")
    assert world.claim("JobC") is None
    for job in ("JobB", "JobC"):
        claim = world.claim(job)
        assert claim is not None
        assert (claim.lot, claim.attempt) == ("1", 2)
        world.lots.complete(claim)
    assert {r[4] for r in world.table()} == {"READY", "DONE"}
