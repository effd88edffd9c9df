"""Seed 000 ("Dataset State Transitions"), every scenario as corrected by SPEC §3.

Each test is named after its scenario; each "Then" line of the seed is one assertion (marked with
the line it checks). Runs on SQLite and PostgreSQL through the ``lineage`` fixture.
"""

from __future__ import annotations

import pytest

from lotline.services import Lineage
from support.world import World


@pytest.fixture
def world(lineage: Lineage) -> World:
    return World(lineage)


def _existing_chain(world: World) -> None:
    """Given JobA@Run1 produces DatasetX@V1, JobB@Run1 consumes X@V1 and produces DatasetY@V1."""
    world.run("JobA@Run1", "succeeds", produces=["DatasetX"])
    world.run("JobB@Run1", "succeeds", consumes=["DatasetX"], produces=["DatasetY"])


def test_base_case(world: World, lineage: Lineage) -> None:
    world.run("JobA@Run1", "succeeds", consumes=["DatasetX"], produces=["DatasetY"])

    job_versions = lineage.catalog.list_job_versions(world.ns, "JobA")
    assert job_versions.total_count == 1  # Create JobA V1
    assert lineage.catalog.get_job(world.ns, "JobA").current_version == job_versions.items[0].id
    assert world.versions("DatasetX") == {1: "current"}  # Create DatasetX@V1
    assert world.current("DatasetX") == 1  # Set DatasetX current version to V1
    assert world.version("DatasetX", 1).run_id is None  # (rule 1: no producing run)
    assert world.consumed("JobA@Run1") == {"DatasetX": 1}  # JobA@Run1 consumes DatasetX@V1
    assert world.versions("DatasetY") == {1: "current"}  # Create DatasetY@V1
    assert world.current("DatasetY") == 1  # Set DatasetY current version to V1
    assert world.produced("JobA@Run1") == {"DatasetY": 1}  # JobA@Run1 produces DatasetY@V1


def test_consume_existing_dataset(world: World, lineage: Lineage) -> None:
    world.given_version_exists("DatasetX")
    assert lineage.catalog.list_jobs(world.ns).total_count == 1  # JobA does not exist (only the loader)

    run_id = world.run("JobA@Run1", "succeeds", consumes=["DatasetX"], produces=["DatasetY"])

    assert lineage.runs.get_run(run_id).job == "JobA"  # Create JobA@Run1
    assert world.consumed("JobA@Run1") == {"DatasetX": 1}  # JobA@Run1 consumes DatasetX@V1
    assert world.versions("DatasetX") == {1: "current"}  # (consuming creates no version of X)
    assert world.versions("DatasetY") == {1: "current"}  # Create DatasetY@V1
    assert world.current("DatasetY") == 1  # Set DatasetY current version to V1
    assert world.produced("JobA@Run1") == {"DatasetY": 1}  # JobA@Run1 produces DatasetY@V1


def test_consume_and_produce_existing_datasets(world: World, lineage: Lineage) -> None:
    world.run("JobA@Run1", "succeeds", consumes=["DatasetX"], produces=["DatasetY"])  # Given

    run_id = world.run("JobA@Run2", "succeeds", consumes=["DatasetX"], produces=["DatasetY"])

    assert lineage.runs.get_run(run_id).job == "JobA"  # Create JobA@Run2
    assert world.consumed("JobA@Run2") == {"DatasetX": 1}  # JobA@Run2 consumes DatasetX@V1 (corrected)
    assert world.versions("DatasetY") == {1: "superseded", 2: "current"}  # Create DatasetY@V2
    assert world.current("DatasetY") == 2  # Set DatasetY current version to V2
    assert world.produced("JobA@Run2") == {"DatasetY": 2}  # JobA@Run2 produces DatasetY@V2


def test_successful_job_chain(world: World, lineage: Lineage) -> None:
    world.run("JobA@Run1", "succeeds", produces=["DatasetX"])
    world.run("JobB@Run1", "succeeds", consumes=["DatasetX"], produces=["DatasetY"])

    assert {j.name for j in lineage.catalog.list_jobs(world.ns).items} == {"JobA", "JobB"}  # Create Job*@Run1
    assert world.versions("DatasetX") == {1: "current"}  # Create DatasetX@V1
    assert world.current("DatasetX") == 1  # Set DatasetX current version to V1
    assert world.versions("DatasetY") == {1: "current"}  # Create DatasetY@V1
    assert world.current("DatasetY") == 1  # Set DatasetY current version to V1
    assert world.produced("JobA@Run1") == {"DatasetX": 1}  # JobA@Run1 produces DatasetX@V1
    assert world.consumed("JobB@Run1") == {"DatasetX": 1}  # JobB@Run1 consumes DatasetX@V1
    assert world.produced("JobB@Run1") == {"DatasetY": 1}  # JobB@Run1 produces DatasetY@V1
    assert world.version("DatasetX", 1).run_id == world.run_ids["JobA@Run1"]


def test_successful_job_chain_with_existing_datasets(world: World) -> None:
    _existing_chain(world)

    world.run("JobA@Run2", "succeeds", produces=["DatasetX"])  # corrected: new runs are Run2
    world.run("JobB@Run2", "succeeds", consumes=["DatasetX"], produces=["DatasetY"])

    assert world.versions("DatasetX") == {1: "superseded", 2: "current"}  # Create DatasetX@V2
    assert world.current("DatasetX") == 2  # Set DatasetX current version to V2
    assert world.versions("DatasetY") == {1: "superseded", 2: "current"}  # Create DatasetY@V2
    assert world.current("DatasetY") == 2  # Set DatasetY current version to V2
    assert world.produced("JobA@Run2") == {"DatasetX": 2}  # JobA@Run2 produces DatasetX@V2
    assert world.consumed("JobB@Run2") == {"DatasetX": 2}  # JobB@Run2 consumes DatasetX@V2
    assert world.produced("JobB@Run2") == {"DatasetY": 2}  # JobB@Run2 produces DatasetY@V2
    assert world.produced("JobA@Run1") == {"DatasetX": 1}  # history is immutable
    assert world.consumed("JobB@Run1") == {"DatasetX": 1}


def test_failed_job_chain_with_existing_datasets_workflow_stops(world: World) -> None:
    _existing_chain(world)

    world.run("JobA@Run2", "fails", produces=["DatasetX"])

    assert world.versions("DatasetX") == {1: "current", 2: "failed"}  # Create DatasetX@V2
    assert world.current("DatasetX") == 1  # DatasetX current version is V1
    assert world.produced("JobA@Run1") == {"DatasetX": 1}  # JobA@Run1 produces DatasetX@V1
    assert world.consumed("JobB@Run1") == {"DatasetX": 1}  # JobB@Run1 consumes DatasetX@V1
    assert world.produced("JobB@Run1") == {"DatasetY": 1}  # JobB@Run1 produces DatasetY@V1
    assert world.produced("JobA@Run2") == {"DatasetX": 2}  # JobA@Run2 produces DatasetX@V2
    assert world.current("DatasetY") == 1  # DatasetY current version remains at V1
    assert world.versions("DatasetY") == {1: "current"}


def test_failed_job_chain_with_existing_datasets_workflow_continues(world: World) -> None:
    _existing_chain(world)

    world.run("JobA@Run2", "fails", produces=["DatasetX"])
    world.run("JobB@Run2", "succeeds", consumes=["DatasetX"], produces=["DatasetY"])

    assert world.versions("DatasetX")[2] == "failed"  # Create DatasetX@V2
    assert world.current("DatasetX") == 1  # DatasetX current version is V1
    assert world.produced("JobA@Run1") == {"DatasetX": 1}  # JobA@Run1 produces DatasetX@V1
    assert world.consumed("JobB@Run1") == {"DatasetX": 1}  # JobB@Run1 consumes DatasetX@V1
    assert world.produced("JobB@Run1") == {"DatasetY": 1}  # JobB@Run1 produces DatasetY@V1
    assert world.produced("JobA@Run2") == {"DatasetX": 2}  # JobA@Run2 produces DatasetX@V2
    assert world.consumed("JobB@Run2") == {"DatasetX": 1}  # JobB@Run2 consumes DatasetX@V1
    assert world.produced("JobB@Run2") == {"DatasetY": 2}  # JobB@Run2 produces DatasetY@V2

    # SPEC §3 correction: a later successful JobA run creates DatasetX@V3, which becomes current.
    world.run("JobA@Run3", "succeeds", produces=["DatasetX"])
    assert world.versions("DatasetX") == {1: "superseded", 2: "failed", 3: "current"}
    assert world.current("DatasetX") == 3
    assert world.produced("JobA@Run3") == {"DatasetX": 3}


def _given_parent_and_versions(world: World) -> None:
    """Given JobA@Run1 exists (running), and DatasetX@V1, DatasetY@V1, DatasetZ@V1 exist."""
    for dataset in ("DatasetX", "DatasetY", "DatasetZ"):
        world.given_version_exists(dataset)
    world.start("JobA@Run1")


def _child_then_parent_then_consumer(world: World, child_outcome: str, parent_outcome: str) -> None:
    world.start("JobB@Run1", consumes=["DatasetX"], produces=["DatasetY"], parent="JobA@Run1")
    world.finish("JobB@Run1", child_outcome)
    world.finish("JobA@Run1", parent_outcome)
    world.run("JobC@Run1", "succeeds", consumes=["DatasetY"], produces=["DatasetZ"])


def test_parent_jobs_with_successful_child_jobs(world: World, lineage: Lineage) -> None:
    _given_parent_and_versions(world)

    _child_then_parent_then_consumer(world, "succeeds", "succeeds")

    assert lineage.runs.get_run(world.run_ids["JobB@Run1"]).parent_run_id == world.run_ids["JobA@Run1"]
    assert world.versions("DatasetY") == {1: "superseded", 2: "current"}  # Create DatasetY@V2
    assert world.current("DatasetY") == 2  # DatasetY current version is V2
    assert world.consumed("JobB@Run1") == {"DatasetX": 1}  # JobB@Run1 consumes DatasetX@V1
    assert world.produced("JobB@Run1") == {"DatasetY": 2}  # JobB@Run1 produces DatasetY@V2
    assert world.consumed("JobC@Run1") == {"DatasetY": 2}  # JobC@Run1 consumes DatasetY@V2
    assert world.produced("JobC@Run1") == {"DatasetZ": 2}  # JobC@Run1 produces DatasetZ@V2


def test_parent_jobs_with_failed_child_jobs(world: World, lineage: Lineage) -> None:
    _given_parent_and_versions(world)

    _child_then_parent_then_consumer(world, "fails", "succeeds")

    children = lineage.runs.child_runs(world.run_ids["JobA@Run1"])
    assert [c.id for c in children] == [world.run_ids["JobB@Run1"]]
    assert world.versions("DatasetY") == {1: "current", 2: "failed"}  # Create DatasetY@V2 (not current)
    assert world.current("DatasetY") == 1  # corrected: DatasetY stays at V1
    assert world.consumed("JobB@Run1") == {"DatasetX": 1}  # JobB@Run1 consumes DatasetX@V1
    assert world.produced("JobB@Run1") == {"DatasetY": 2}
    assert world.consumed("JobC@Run1") == {"DatasetY": 1}  # JobC@Run1 consumes DatasetY@V1
    assert world.produced("JobC@Run1") == {"DatasetZ": 2}  # JobC@Run1 produces DatasetZ@V2


def test_parent_jobs_fails(world: World, lineage: Lineage) -> None:
    _given_parent_and_versions(world)

    _child_then_parent_then_consumer(world, "succeeds", "fails")

    assert lineage.runs.get_run(world.run_ids["JobA@Run1"]).state.value == "FAILED"
    assert world.versions("DatasetY") == {1: "superseded", 2: "current"}  # Create DatasetY@V2
    assert world.current("DatasetY") == 2  # DatasetY current version is V2 (parent's failure is moot)
    assert world.consumed("JobB@Run1") == {"DatasetX": 1}  # JobB@Run1 consumes DatasetX@V1
    assert world.produced("JobB@Run1") == {"DatasetY": 2}  # JobB@Run1 produces DatasetY@V2
    assert world.consumed("JobC@Run1") == {"DatasetY": 2}  # JobC@Run1 consumes DatasetY@V2
    assert world.produced("JobC@Run1") == {"DatasetZ": 2}  # JobC@Run1 produces DatasetZ@V2
