"""A real dbt project (duckdb) run through ``dbt-ol`` into a test server on PostgreSQL (issue
42, point 5): lotline as the lineage server of a producer it did not write.

``tests/support/dbt_project``: two seeds, ``stg_customers``, ``customer_profile_enriched_with_orders``
(seven columns, two of them documented: dbt-ol's schema facet lists only those, its column lineage
all seven) and ``customer_profile_enriched_with_payments``, which fails on purpose (a column that
does not exist); three tests on the profile, one of which fails (``not_null`` on ``email``).
``dbt-ol seed``, ``run``, ``test``, then ``run`` again: the test's results belong to the version it
read, not to the one written after it.

dbt runs from its own venv (``.venv-dbt``, made by scripts/_venv.sh from the ``dbt`` extra; dbt-core
1.10 breaks mypy in the dev venv): without it this skips, unless ``LOTLINE_REQUIRE_DBT=1`` (CI)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
from marquez_client import MarquezClient

from api.conftest import AUTH, TOKEN, ApiServer
from lotline.services import Lineage
from lotline.store.engine import Store
from support.databases import ON_POSTGRESQL

pytestmark = pytest.mark.dbt

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "support" / "dbt_project"
PROFILE = "customer_profile_enriched_with_orders"
FAILING = "customer_profile_enriched_with_payments"
PROFILE_COLUMNS = {
    "customer_id",
    "first_name",
    "last_name",
    "email",
    "order_count",
    "lifetime_value",
    "display_name",
}


def _dbt_bin() -> Path:
    venv = Path(os.environ.get("LOTLINE_DBT_VENV", ROOT / ".venv-dbt"))
    found = venv / "bin"
    if not (found / "dbt-ol").exists():
        reason = f"no dbt-ol in {venv}: scripts/_venv.sh installs the `dbt` extra there"
        if os.environ.get("LOTLINE_REQUIRE_DBT") == "1":
            pytest.fail(reason + "; LOTLINE_REQUIRE_DBT=1 requires it")
        pytest.skip(reason)
    return found


def _dbt(bin_dir: Path, project: Path, env: dict[str, str], command: str) -> int:
    """One ``dbt-ol`` command; its exit code (1 when a model or a test failed, as meant)."""
    done = subprocess.run(
        [str(bin_dir / "dbt-ol"), command, "--profiles-dir", str(project), "--project-dir", str(project)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.returncode


def _get(server: ApiServer, path: str, **params: Any) -> Any:
    answer = requests.get(server.api(path), params=params, headers=AUTH, timeout=30)
    assert answer.status_code == 200, f"{path}: {answer.status_code} {answer.text}"
    return answer.json()


# On PostgreSQL only: what the server does with the events it is sent is tested on both elsewhere
# (tests/api/test_openlineage_client.py); this is about what dbt-ol sends.
@pytest.mark.parametrize("api_server", ON_POSTGRESQL, indirect=True)
def test_a_dbt_project_run_through_dbt_ol(api_server: ApiServer, tmp_path: Path) -> None:
    bin_dir = _dbt_bin()
    project = tmp_path / "jaffle_shop"
    shutil.copytree(PROJECT, project)
    database = tmp_path / "jaffle.duckdb"
    job_ns = f"dbt-{uuid.uuid4().hex[:8]}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE_")},
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "DBT_DUCKDB_PATH": str(database),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "OPENLINEAGE_URL": api_server.url,
        "OPENLINEAGE_API_KEY": TOKEN,
        "OPENLINEAGE_NAMESPACE": job_ns,
    }
    assert _dbt(bin_dir, project, env, "seed") == 0
    assert _dbt(bin_dir, project, env, "run") == 1  # the payments model fails on purpose
    assert _dbt(bin_dir, project, env, "test") == 1  # not_null on email fails on purpose
    assert _dbt(bin_dir, project, env, "run") == 1

    status = _get(api_server, "/lineage/status")
    assert status["failed"] == 0, (status, _projection_errors(api_server.db_url))
    ds_ns, profile = f"duckdb://{database}", f"jaffle.main.{PROFILE}"
    q_ds, q_job = quote(ds_ns, safe=""), quote(job_ns, safe="")
    jobs = {j["name"]: j for j in _get(api_server, f"/namespaces/{q_job}/jobs", limit=100)["jobs"]}
    assert jobs[f"jaffle.main.jaffle_shop.{FAILING}"]["latestRun"]["state"] == "FAILED"
    assert jobs[f"jaffle.main.jaffle_shop.{PROFILE}"]["latestRun"]["state"] == "COMPLETED"
    test_job = jobs[f"jaffle.main.jaffle_shop.{PROFILE}.test"]
    assert test_job["latestRun"]["state"] == "FAILED"

    # 1. Column lineage of every column dbt-ol names, not only the documented ones.
    dataset = _get(api_server, f"/namespaces/{q_ds}/datasets/{quote(profile, safe='')}")
    assert {f["name"] for f in dataset["fields"]} == {"customer_id", "email"}  # the schema facet
    client = MarquezClient(url=api_server.url, api_key=TOKEN)
    columns = client.get_column_lineage_by_dataset(ds_ns, profile, depth=1)
    own = {n["data"]["field"] for n in columns["graph"] if n["data"]["dataset"] == profile}
    assert own == PROFILE_COLUMNS
    ids = {n["id"] for n in columns["graph"]}
    for node in columns["graph"]:
        assert {e["origin"] for e in node["inEdges"]} <= ids
    # 3. A field answers that field and what it is computed from, to the depth asked.
    display = client.get_column_lineage_by_dataset_field(ds_ns, profile, "display_name", depth=1)
    assert {(n["data"]["dataset"], n["data"]["field"]) for n in display["graph"]} == {
        (profile, "display_name"),
        ("jaffle.main.stg_customers", "first_name"),
        ("jaffle.main.stg_customers", "last_name"),
    }
    deeper = client.get_column_lineage_by_dataset_field(ds_ns, profile, "display_name", depth=2)
    assert ("jaffle.main.raw_customers", "first_name") in {
        (n["data"]["dataset"], n["data"]["field"]) for n in deeper["graph"]
    }

    # 2. The test's results are the version's it read; the version written after carries none.
    versions = {
        v["versionNumber"]: v
        for v in _get(api_server, f"/namespaces/{q_ds}/datasets/{quote(profile, safe='')}/versions")[
            "versions"
        ]
    }
    assert sorted(versions) == [1, 2]
    tested = versions[1]["facets"]["dataQualityAssertions"]["assertions"]
    assert {(a["assertion"], a["column"], a["success"]) for a in tested} == {
        ("not_null", "customer_id", True),
        ("unique", "customer_id", True),
        ("not_null", "email", False),
    }
    assert "dataQualityAssertions" not in versions[2]["facets"]
    assert dataset["facets"]["dataQualityAssertions"]["assertions"] == tested  # the latest arrived
    test_run = _get(api_server, f"/jobs/runs/{test_job['latestRun']['id']}")
    [read] = test_run["inputDatasetVersions"]
    assert read["datasetVersionId"]["version"] == versions[1]["version"]
    assert read["facets"]["dataQualityAssertions"]["assertions"] == tested


def _projection_errors(db_url: str) -> list[tuple[int, str]]:
    """Why the journal's failed events failed (for the assertion's message)."""
    with Lineage.over(Store(db_url)) as lineage:
        return lineage.projection.failures()
