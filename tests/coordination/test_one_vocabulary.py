"""One word for a lot's state on every surface (issue 39.4): ``lotline status``, the gap report, the
lot page and the dataset page say the same word after an invalidation, a failure and a hold; the
coordination words (READY, RESUBMIT, …) stay in the coordination docs."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from lotline.api.app import create_app
from lotline.cli.main import app
from lotline.domain.lots import Interval, lot_at
from lotline.services.config import Settings
from support.lots import LotWorld
from support.ol import run_history

HOURS = [f"20230101PT1H00{n}" for n in range(4)]
COORDINATION = re.compile(r">\s*(ready|resubmit|error|done|hold|pending)\s*<", re.IGNORECASE)


@pytest.fixture
def cli(backend_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CliRunner:
    monkeypatch.setenv("LOTLINE_DB_URL", backend_url)
    monkeypatch.chdir(str(tmp_path))
    return CliRunner()


def _moved(world: LotWorld) -> None:
    """A chain raw → clean of hourly lots: hour 0 invalidated (clean's hour 0 then waits on it),
    hour 1 failed, hour 2 held, hour 3 complete."""
    world.job("land", output="raw")
    world.job("tidy", inputs=["raw"], output="clean")
    world.produce("land", *HOURS)
    world.produce("tidy", HOURS[0], HOURS[2], HOURS[3])
    failed = world.claim("tidy", HOURS[1])
    assert failed is not None
    world.lots.fail(failed, error=ValueError("bad row 17"))
    world.lots.invalidate(world.ns, "raw", HOURS[0])
    world.lots.hold_lot(world.ns, "clean", HOURS[2])


def test_every_surface_names_a_lot_with_the_gap_reports_word(
    cli: CliRunner, world: LotWorld, backend_url: str, tmp_path: Path
) -> None:
    _moved(world)
    expected = {HOURS[0]: "blocked", HOURS[1]: "failed", HOURS[2]: "held", HOURS[3]: "complete"}
    status = json.loads(cli.invoke(app, ["status", "-n", world.ns, "--dataset", "clean", "--json"]).output)
    assert {lot["lot"]: lot["state"] for lot in status["lots"]} == expected
    listed = cli.invoke(app, ["status", "-n", world.ns, "--dataset", "clean", "--lots"]).output
    with_row = listed.split("lots with no row yet")[0]  # the lots since, up to now, follow as runs
    rows = [line.split() for line in with_row.splitlines() if line.startswith("clean ")]
    assert {row[1]: row[3] for row in rows} == expected
    for word in ("READY", "RESUBMIT", "ERROR", "HOLD", "DONE"):
        assert word not in listed
    report = world.lineage.gaps.report(
        world.ns, dataset="clean", start="2023-01-01T00:00:00Z", end="2023-01-01T04:00:00Z"
    )
    by_report = {run.first: run.state.value for run in report.runs}
    assert by_report == {lot: word for lot, word in expected.items() if word != "complete"}
    served = create_app(Settings(db_url=backend_url, warehouse=str(tmp_path / "warehouse"), api_token=None))
    served.state.lineage = world.lineage
    client = TestClient(served, base_url="http://127.0.0.1")
    for lot, word in expected.items():
        page = client.get(f"/datasets/{world.ns}/clean/lots/{lot}")
        assert page.status_code == 200, page.text
        assert f'data-state="{word}"' in page.text
        jobs = page.text[page.text.index('id="lot-status"') :]
        jobs = jobs[: jobs.index("</table>")]
        assert f"st-{word}" in jobs and not COORDINATION.search(jobs), jobs
    # The raw lot that was reopened: missing on its page, and its reader's row is no failure.
    raw = client.get(f"/datasets/{world.ns}/raw/lots/{HOURS[0]}").text
    assert 'data-state="missing"' in raw and "to read again" in raw and "st-error" not in raw
    listing = client.get(f"/datasets/{world.ns}/clean").text
    for lot, word in expected.items():
        assert re.search(rf"{lot}</a></td>\s*<td data-state=\"{word}\">", listing), lot
    failed_only = client.get(f"/datasets/{world.ns}/clean?lot_state=failed").text
    failed_only = failed_only[failed_only.index('id="lot-list"') :]
    assert HOURS[1] in failed_only and HOURS[3] not in failed_only
    refused = client.get(f"/datasets/{world.ns}/clean?lot_state=blocked")
    assert refused.status_code == 400 and "blocked lots are missing or failed" in refused.text


def test_a_namespace_made_by_another_tool_s_events_leaves_the_one_with_lots_the_default(
    cli: CliRunner, world: LotWorld
) -> None:
    """Issue 39.8: the CLI's default namespace is lotline.toml's, else the only one, else the only
    one with lots — a second namespace that another tool's OpenLineage events made does not break
    every command run without ``-n``; two namespaces with lots still need ``-n``."""
    _moved(world)
    world.lineage.openlineage.accept_batch(run_history("dbt_prod", "model", str(uuid.uuid4()), steps=0))
    world.lineage.projection.drain()
    assert {n.name for n in world.lineage.catalog.list_namespaces().items} == {world.ns, "dbt_prod"}
    status = cli.invoke(app, ["status", "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)["namespace"] == world.ns
    other = LotWorld(world.lineage, "second")
    other.job("land", output="raw")
    other.produce("land", HOURS[0])
    refused = cli.invoke(app, ["status"])
    assert refused.exit_code == 2
    assert "3 namespaces exist" in refused.output and "-n/--namespace" in refused.output


def test_status_counts_every_lot_up_to_now_as_the_gap_report_does(cli: CliRunner, world: LotWorld) -> None:
    """`lotline status` counts a job's lots from the first up to now, as the gap report and the start
    page do: an hour never delivered is missing there too, not absent from the table."""
    now = datetime.now(UTC)
    recent = [str(lot_at(now - timedelta(hours=back), Interval.parse("PT1H"))) for back in (6, 5, 4, 3)]
    world.job("land", output="raw")
    world.produce("land", recent[0], recent[1], recent[3])

    def reported() -> dict[str, int]:
        found = world.lineage.gaps.report(world.ns, job="land")
        return {state.value: n for state, n in found.counts.items() if n}

    before = reported()
    status = cli.invoke(app, ["status", "-n", world.ns, "--json"])
    after = reported()
    assert status.exit_code == 0, status.output
    [counted] = [j["counts"] for j in json.loads(status.output)["jobs"] if j["job"] == "land"]
    assert counted in (before, after)  # the same lots, unless an hour ended between the reads
    assert counted["complete"] == 3 and counted["missing"] >= 1  # the hour left out (and any due since)
