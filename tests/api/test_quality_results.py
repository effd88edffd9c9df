"""Quality results keyed by the dataset version they arrived with (issue 42, point 2), on a real
server on both databases: a dbt test's ``dataQualityAssertions`` (sent as an input facet and, by
dbt-ol, also as a dataset facet) belong to the version the test read; versions written later by
runs without assertions carry none; a writer's results (output facets) are its own version's; the
dataset shows the latest; a run answers what it reported per input and output, as Marquez does."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import requests

from api.conftest import ApiServer
from api.test_marquez_runs_events import Rest
from support.ol import PRODUCER, run_event

DQ_SCHEMA = "https://openlineage.io/spec/facets/1-1-0/DataQualityAssertionsDatasetFacet.json"


def _assertions(*results: tuple[str, str, bool]) -> dict[str, Any]:
    return {
        "_producer": PRODUCER,
        "_schemaURL": DQ_SCHEMA,
        "assertions": [{"assertion": a, "column": c, "success": ok} for a, c, ok in results],
    }


@pytest.fixture
def rest(api_server: ApiServer, http: requests.Session, fresh_ns: str) -> Rest:
    return Rest(api_server, http, fresh_ns)


def _model(rest: Rest, second: int, output_facets: dict[str, Any] | None = None) -> str:
    run_id = str(uuid.uuid4())
    event = run_event(rest.ns, "model", run_id, "COMPLETE", second=second, outputs=("profile",))
    event["outputs"][0]["facets"] = {"schema": {"_producer": PRODUCER, "_schemaURL": "s", "fields": []}}
    if output_facets:
        event["outputs"][0]["outputFacets"] = output_facets
    rest.post(event)
    return run_id


def _test(rest: Rest, second: int, facet: dict[str, Any], *, as_dataset_facet: bool) -> str:
    """A dbt test's run: it reads ``profile`` and reports its assertions as an input facet (and,
    as dbt-ol 1.54 does, also as a dataset facet)."""
    run_id = str(uuid.uuid4())
    failed = not all(a["success"] for a in facet["assertions"])
    event = run_event(
        rest.ns, "profile.test", run_id, "FAIL" if failed else "COMPLETE", second=second, inputs=("profile",)
    )
    event["inputs"][0]["inputFacets"] = {"dataQualityAssertions": facet}
    if as_dataset_facet:
        event["inputs"][0]["facets"] = {"dataQualityAssertions": facet}
    rest.post(event)
    return run_id


def test_results_stay_with_the_version_they_arrived_with(rest: Rest) -> None:
    rest.setup()
    versions_path = f"/namespaces/{rest.q}/datasets/profile/versions"

    def by_number() -> dict[int, dict[str, Any]]:
        return {v["versionNumber"]: v for v in rest.call("GET", versions_path, limit=100)["versions"]}

    first_model = _model(rest, 0)
    failing = _assertions(("not_null", "id", True), ("unique", "email", False))
    first_test = _test(rest, 1, failing, as_dataset_facet=True)
    for second in (2, 3, 4):  # three later versions, written by runs that assert nothing
        _model(rest, second)
    versions = by_number()
    assert sorted(versions) == [1, 2, 3, 4]
    assert versions[1]["facets"]["dataQualityAssertions"] == failing
    assert versions[1]["createdByRun"]["id"] == first_model
    for number in (2, 3, 4):
        assert "dataQualityAssertions" not in versions[number]["facets"], number
    dataset = rest.call("GET", f"/namespaces/{rest.q}/datasets/profile")
    assert dataset["facets"]["dataQualityAssertions"] == failing  # the latest that arrived

    passing = _assertions(("not_null", "id", True), ("unique", "email", True))
    _test(rest, 5, passing, as_dataset_facet=False)  # an input facet only
    versions = by_number()
    assert versions[4]["facets"]["dataQualityAssertions"] == passing
    assert versions[1]["facets"]["dataQualityAssertions"] == failing
    assert (
        rest.call("GET", f"/namespaces/{rest.q}/datasets/profile")["facets"]["dataQualityAssertions"]
        == passing
    )
    assert rest.call("GET", f"{versions_path}/{versions[4]['version']}")["facets"] == versions[4]["facets"]

    # The run answers what it reported for its input, with the version it read.
    run = rest.call("GET", f"/jobs/runs/{first_test}")
    [read] = run["inputDatasetVersions"]
    assert read["datasetVersionId"]["version"] == versions[1]["version"]
    assert read["facets"]["dataQualityAssertions"] == failing


def test_a_writer_s_results_are_its_own_version_s(rest: Rest) -> None:
    rest.setup()
    metrics = {
        "_producer": PRODUCER,
        "_schemaURL": "m",
        "rowCount": 7,
        "columnMetrics": {"id": {"nullCount": 0}},
    }
    checked = _model(rest, 0, {"dataQualityMetrics": metrics, "outputStatistics": {"rowCount": 7}})
    _model(rest, 1)
    versions = {
        v["versionNumber"]: v
        for v in rest.call("GET", f"/namespaces/{rest.q}/datasets/profile/versions")["versions"]
    }
    assert versions[1]["facets"]["dataQualityMetrics"] == metrics
    assert "dataQualityMetrics" not in versions[2]["facets"]
    [written] = rest.call("GET", f"/jobs/runs/{checked}")["outputDatasetVersions"]
    assert written["facets"] == {"dataQualityMetrics": metrics}  # the quality results it reported
