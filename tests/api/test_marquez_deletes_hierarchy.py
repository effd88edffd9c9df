"""Marquez's own tests of deletes, tags and the job hierarchy (issue 20, points 1 and 2), ported to
lotline's real server on both databases. Each names the Marquez test it follows
(MarquezProject/marquez, ``api/src/test/java/marquez/``).
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

import pytest
import requests

from api.conftest import ApiServer
from api.test_marquez_runs_events import Rest
from support.ol import PRODUCER, run_event


@pytest.fixture
def rest(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> Rest:
    return Rest(api_server, http, fresh_ns)


def _names(found: list[dict[str, Any]]) -> list[str]:
    return sorted(item["name"] for item in found)


def _read(
    rest: Rest, ns: str, job: str, run_id: str, *, parent: tuple[str, str] | None = None, **io: Any
) -> None:
    """A COMPLETE event of ``job`` (with a parent facet naming (parent job, its run id))."""
    facets = {}
    if parent is not None:
        facets["parent"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ParentRunFacet.json",
            "run": {"runId": parent[1]},
            "job": {"namespace": ns, "name": parent[0]},
        }
    rest.post(run_event(ns, job, run_id, "COMPLETE", facets=facets, **io))


# -- point 1: deletes --------------------------------------------------------------------------


def test_a_deleted_namespace_is_hidden(rest: Rest) -> None:
    """NamespaceIntegrationTest.testApp_deleteNamespace."""
    rest.setup()
    assert rest.call("GET", f"/namespaces/{rest.q}")["isHidden"] is False
    answered = rest.call("DELETE", f"/namespaces/{rest.q}")
    assert (answered["name"], answered["isHidden"]) == (rest.ns, False)  # as it was, like Marquez
    assert rest.call("GET", f"/namespaces/{rest.q}")["isHidden"] is True
    listed = rest.call("GET", "/namespaces", limit=1000)["namespaces"]
    assert rest.ns not in _names(listed)


def test_deleting_a_namespace_hides_its_datasets_and_a_later_event_brings_back_only_the_namespace(
    rest: Rest,
) -> None:
    """DatasetIntegrationTest.testApp_doesNotShowDeletedDatasetAfterDeleteNamespace and
    testApp_doesNotShowDeletedDatasetAfterUndeleteNamespace."""
    _read(rest, rest.ns, "job_name", str(uuid.uuid4()), inputs=("table",))
    assert _names(rest.call("GET", f"/namespaces/{rest.q}/datasets")["datasets"]) == ["table"]
    rest.call("DELETE", f"/namespaces/{rest.q}")
    assert rest.call("GET", f"/namespaces/{rest.q}/datasets")["datasets"] == []
    assert rest.call("GET", f"/namespaces/{rest.q}/jobs")["jobs"] == []

    _read(rest, rest.ns, "second_job_name", str(uuid.uuid4()), inputs=("table2",))
    assert rest.call("GET", f"/namespaces/{rest.q}")["isHidden"] is False
    assert _names(rest.call("GET", f"/namespaces/{rest.q}/datasets")["datasets"]) == ["table2"]
    assert _names(rest.call("GET", f"/namespaces/{rest.q}/jobs")["jobs"]) == ["second_job_name"]


def test_a_deleted_job_is_hidden_until_written_again(rest: Rest) -> None:
    """OpenLineageIntegrationTest's job delete (``client.deleteJob``: the job leaves the listing,
    its parent stays), and Marquez's undelete on a new event."""
    parent_run = str(uuid.uuid4())
    _read(rest, rest.ns, "parent.child", str(uuid.uuid4()), parent=("parent", parent_run), outputs=("out",))
    assert _names(rest.call("GET", f"/namespaces/{rest.q}/jobs")["jobs"]) == ["parent", "parent.child"]
    answered = rest.call("DELETE", f"/namespaces/{rest.q}/jobs/parent.child")
    assert answered["name"] == "parent.child"
    assert _names(rest.call("GET", f"/namespaces/{rest.q}/jobs")["jobs"]) == ["parent"]
    rest.call("GET", f"/namespaces/{rest.q}/jobs/parent.child", status=404)
    graph = rest.lineage(f"dataset:{rest.ns}:out")
    assert f"job:{rest.ns}:parent.child" not in {node["id"] for node in graph}

    _read(rest, rest.ns, "parent.child", str(uuid.uuid4()), outputs=("out",))
    assert _names(rest.call("GET", f"/namespaces/{rest.q}/jobs")["jobs"]) == ["parent", "parent.child"]
    assert f"job:{rest.ns}:parent.child" in {node["id"] for node in rest.lineage(f"dataset:{rest.ns}:out")}


def test_deleting_what_does_not_exist_is_a_404_and_changes_nothing(
    rest: Rest, http: requests.Session
) -> None:
    rest.setup("table")
    rest.put_job("job")
    missing = quote("no-such-namespace-" + uuid.uuid4().hex, safe="")
    rest.call("DELETE", f"/namespaces/{missing}", status=404)
    rest.call("DELETE", f"/namespaces/{rest.q}/jobs/no_such_job", status=404)
    rest.call("DELETE", f"/namespaces/{rest.q}/jobs/job/tags/NO_SUCH_TAG", status=404)
    rest.call("DELETE", f"/namespaces/{rest.q}/datasets/table/fields/nope/tags/PII", status=404)
    # A delete is a write: without the token it is refused and nothing is hidden.
    answer = requests.delete(rest.server.api(f"/namespaces/{rest.q}/jobs/job"), timeout=10)
    assert answer.status_code == 401
    answer = requests.delete(rest.server.api(f"/namespaces/{rest.q}"), timeout=10)
    assert answer.status_code == 401
    assert rest.call("GET", f"/namespaces/{rest.q}")["isHidden"] is False
    assert rest.job("job")["name"] == "job"


def test_job_tags(rest: Rest) -> None:
    """TagResourceIntegrationTest.testApp_testJobTag and testApp_testJobTagDelete."""
    rest.setup()
    rest.put_job("job")
    tagged = rest.call("POST", f"/namespaces/{rest.q}/jobs/job/tags/TESTDATASETTAG")
    assert tagged["tags"] == ["TESTDATASETTAG"]
    assert rest.job("job")["tags"] == ["TESTDATASETTAG"]
    untagged = rest.call("DELETE", f"/namespaces/{rest.q}/jobs/job/tags/TESTDATASETTAG")
    assert untagged["tags"] == []


def test_field_tags_can_be_deleted(rest: Rest) -> None:
    """TagResourceIntegrationTest.testApp_testDatasetTagFieldDelete: only SENSITIVE remains."""
    rest.setup()
    path = f"/namespaces/{rest.q}/datasets/table"
    rest.call(
        "PUT", path, {"type": "DB_TABLE", "physicalName": "t", "fields": [{"name": "a", "type": "INT"}]}
    )
    for tag in ("PII", "SENSITIVE"):
        rest.call("POST", f"{path}/fields/a/tags/{tag}")
    assert rest.call("GET", path)["fields"][0]["tags"] == ["PII", "SENSITIVE"]
    answered = rest.call("DELETE", f"{path}/fields/a/tags/PII")
    assert answered["fields"][0]["tags"] == ["SENSITIVE"]


# -- point 2: the job hierarchy ------------------------------------------------------------------


def test_airflow_tasks_have_their_dag_as_parent(rest: Rest) -> None:
    """OpenLineageIntegrationTest.testOpenLineageJobHierarchyAirflowIntegration: two tasks of one
    DAG run; each task's job has the DAG as parent, the DAG has none and one run."""
    dag_run = str(uuid.uuid4())
    for task in ("task1", "task2"):
        _read(rest, rest.ns, f"the_dag.{task}", str(uuid.uuid4()), parent=("the_dag", dag_run))
    job = rest.job("the_dag.task1")
    assert (job["parentJobName"], job["simpleName"]) == ("the_dag", "task1")
    dag = rest.job("the_dag")
    assert (dag["parentJobName"], dag["simpleName"]) == (None, "the_dag")
    runs = rest.call("GET", f"/namespaces/{rest.q}/jobs/the_dag/runs")["runs"]
    assert [r["id"] for r in runs] == [dag_run]


def test_a_parent_is_kept_when_a_later_event_has_none(rest: Rest) -> None:
    """OpenLineageIntegrationTest.testOpenLineageJobHierarchyAirflowIntegrationWithParentOnStartEventOnly
    and testOpenLineageJobHierarchyAirflowMissingParentForExistingJob."""
    run_id = str(uuid.uuid4())
    start = run_event(rest.ns, "the_dag.task1", run_id, "START")
    start["run"]["facets"]["parent"] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ParentRunFacet.json",
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": rest.ns, "name": "the_dag"},
    }
    rest.post(start)
    rest.post(run_event(rest.ns, "the_dag.task1", run_id, "COMPLETE", second=5))  # no parent facet
    assert rest.job("the_dag.task1")["parentJobName"] == "the_dag"


def test_a_parent_known_only_from_a_childs_start_is_started_by_it(rest: Rest) -> None:
    """OpenLineageIntegrationTest.testOpenLineageJobHierarchyAirflowIntegrationWithParentOnStartEventOnly:
    the DAG's run exists only through the task's START event's parent facet; it is RUNNING since
    that event (Marquez: ``startedAt`` present). The COMPLETE event has no parent facet."""
    run_id, dag_run = str(uuid.uuid4()), str(uuid.uuid4())
    start = run_event(rest.ns, "the_dag.task1", run_id, "START", second=7)
    start["run"]["facets"]["parent"] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ParentRunFacet.json",
        "run": {"runId": dag_run},
        "job": {"namespace": rest.ns, "name": "the_dag"},
    }
    rest.post(start)
    rest.post(run_event(rest.ns, "the_dag.task1", run_id, "COMPLETE", second=9))
    job = rest.job("the_dag.task1")
    assert (job["parentJobName"], job["simpleName"]) == ("the_dag", "task1")
    assert rest.job("the_dag")["parentJobName"] is None
    (dag,) = rest.call("GET", f"/namespaces/{rest.q}/jobs/the_dag/runs")["runs"]
    assert (dag["id"], dag["state"], dag["startedAt"]) == (dag_run, "RUNNING", "2026-01-01T00:00:07Z")


def test_a_parent_arriving_late_is_set(rest: Rest) -> None:
    """OpenLineageIntegrationTest.testOpenLineageJobHierarchyAirflowAddParentForExistingJob and
    testOpenLineageJobHierarchyAirflowHandlesParentForEventsOutOfOrder."""
    _read(rest, rest.ns, "the_dag.task1", str(uuid.uuid4()))
    assert rest.job("the_dag.task1")["parentJobName"] is None
    _read(rest, rest.ns, "the_dag.task1", str(uuid.uuid4()), parent=("the_dag", str(uuid.uuid4())))
    job = rest.job("the_dag.task1")
    assert (job["parentJobName"], job["simpleName"]) == ("the_dag", "task1")


@pytest.mark.parametrize(
    ("parent", "child", "simple"),
    [
        ("the_dag.task1", "the_dag.task1.spark_job", "spark_job"),  # Spark under an Airflow task
        ("my.dotted.dag", "my.dotted.dag.group.task", "group.task"),  # dots in the DAG, a task group
        ("the_dag", "unrelated_name", "unrelated_name"),  # a name without the parent's prefix
    ],
)
def test_simple_names(rest: Rest, parent: str, child: str, simple: str) -> None:
    """OpenLineageIntegrationTest.testOpenLineageJobHierarchySparkAndAirflow,
    testOpenLineageJobHierarchyAirflowIntegrationWithDagNameWithDot and
    testOpenLineageJobHierarchyAirflowIntegrationWithTaskGroup: ``simpleName`` is the name without
    the parent's name and a dot."""
    _read(rest, rest.ns, child, str(uuid.uuid4()), parent=(parent, str(uuid.uuid4())))
    job = rest.job(child)
    assert (job["parentJobName"], job["simpleName"]) == (parent, simple)
