"""The web UI for jobs another producer sent (issue 42, points 1 and 4), dbt-ol's way: jobs without
lots sorted by trouble with the rest on the start page, long names whose distinguishing end stays
readable in graph nodes (the whole name on hover and in the side panel), quality results as a table
on a dataset version's page and a run's page, and every column the column lineage names."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import requests
from playwright.sync_api import Browser, expect

from api.conftest import TOKEN
from lotline.services.lots import OutputWritten
from support.lots import LotWorld
from web.conftest import Tab, UiServer, tap
from web.world import NS, send_event

DBT = "dbt"
PREFIX = "jaffle.main.jaffle_shop."
STG = "jaffle.main.stg_customers"
ORDERS, PAYMENTS = "customer_profile_enriched_with_orders", "customer_profile_enriched_with_payments"
SHOTS = Path("/tmp/lotline-ui-shots")
_SEEDED: dict[str, dict[str, str]] = {}


def _facet(**fields: Any) -> dict[str, Any]:
    return {"_producer": "https://example.com/dbt", "_schemaURL": "https://example.com/facet", **fields}


def _run(url: str, job: str, outcome: str, second: int, **io: Any) -> str:
    run_id = str(uuid.uuid4())
    for event_type, at in (("START", second), (outcome, second + 1)):
        send_event(
            url,
            TOKEN,
            eventType=event_type,
            eventTime=f"2024-06-01T10:00:{at:02d}Z",
            run={"runId": run_id},
            job={"namespace": DBT, "name": PREFIX + job},
            **io,
        )
    return run_id


def _seed(ui_server: UiServer) -> dict[str, str]:
    """Two lot jobs (one with a failed lot) and four dbt jobs: the orders model (completed twice),
    its test (failed: ``not_null`` on ``email``) between the two, and the payments model (failed)."""
    if ui_server.url in _SEEDED:
        return _SEEDED[ui_server.url]
    url, stg = ui_server.url, {"namespace": DBT, "name": STG}
    world = LotWorld(ui_server.lineage, DBT)
    world.job("lots_ok", output="lots_ok_out")
    world.produce("lots_ok", "a", "b")
    world.job("checked", output="checked_out")  # lotline's own checks: the writer's output facets
    claim = world.claim("checked", "a")
    assert claim is not None
    own = _facet(
        assertions=[
            {"assertion": "row_count", "success": True},
            {"assertion": "not_null", "column": "url", "success": False},
        ]
    )
    quality = OutputWritten(facets={"dataQualityAssertions": own})
    ui_server.lineage.lots.complete(claim, outputs={claim.dataset: quality})
    columns = {
        "customer_id": {"inputFields": [{"namespace": DBT, "name": STG, "field": "customer_id"}]},
        "display_name": {
            "inputFields": [{"namespace": DBT, "name": STG, "field": f} for f in ("first_name", "last_name")]
        },
    }
    orders = {
        "namespace": DBT,
        "name": f"jaffle.main.{ORDERS}",
        "facets": {
            "schema": _facet(fields=[{"name": "customer_id", "type": "INTEGER"}]),  # documented only
            "columnLineage": _facet(fields=columns),
        },
    }
    assertions = _facet(
        assertions=[
            {"assertion": "unique", "column": "customer_id", "success": True},
            {"assertion": "not_null", "column": "email", "success": False, "severity": "error"},
        ]
    )
    tested = {
        "namespace": DBT,
        "name": f"jaffle.main.{ORDERS}",
        "inputFacets": {"dataQualityAssertions": assertions},
    }
    runs = {
        "first": _run(url, ORDERS, "COMPLETE", 0, inputs=[stg], outputs=[orders]),
        "test": _run(url, ORDERS + ".test", "FAIL", 2, inputs=[tested]),
        "second": _run(url, ORDERS, "COMPLETE", 4, inputs=[stg], outputs=[orders]),
        "payments": _run(
            url,
            PAYMENTS,
            "FAIL",
            6,
            inputs=[stg],
            outputs=[{"namespace": DBT, "name": f"jaffle.main.{PAYMENTS}"}],
        ),
    }
    ui_server.lineage.catalog.upsert_namespace(NS, owner_name="tests")  # the start page stays on ``ui``
    _SEEDED[ui_server.url] = runs
    return runs


def _shot(tab: Tab, ui_server: UiServer, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    tab.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_the_start_page_sorts_jobs_without_lots_by_trouble_with_the_rest(
    tab: Tab, ui_server: UiServer
) -> None:
    _seed(ui_server)
    tab.page.goto(f"/?ns={DBT}")
    order = tab.page.locator("#jobs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.job)")
    _shot(tab, ui_server, "start")
    # The failed dbt jobs first (by name), then the jobs where nothing is wrong, lots or none.
    assert order == [PREFIX + ORDERS + ".test", PREFIX + PAYMENTS, "checked", PREFIX + ORDERS, "lots_ok"]


def test_long_names_keep_their_end_readable_and_whole_on_hover_and_in_the_panel(
    tab: Tab, ui_server: UiServer
) -> None:
    _seed(ui_server)
    page = tab.page
    page.goto(f"/lineage?node=dataset:{DBT}:{STG}&depth=1")
    expect(page.locator("#graph")).to_have_attribute("data-ready", "5")
    labels = {}
    for job in (ORDERS, PAYMENTS):
        node = f"lotlineGraph.getElementById('job:{DBT}:{PREFIX}{job}')"
        labels[job] = page.evaluate(f"{node}.data('label')")
        assert page.evaluate(f"{node}.data('name')") == PREFIX + job
        assert labels[job].startswith("…") and labels[job].endswith(job[-12:]), labels[job]
        assert len(labels[job]) <= 22
    assert labels[ORDERS] != labels[PAYMENTS]  # two failed-looking nodes no longer look alike
    # The hover's tooltip (ui.js sets #graph's title to the node's whole name) is not driven here:
    # a synthetic mouseover made headless Chromium's renderer crash in 2 of 5 runs (2026-11-28).
    tap(page, f"job:{DBT}:{PREFIX}{PAYMENTS}")
    expect(page.locator("#node-name")).to_have_text(PREFIX + PAYMENTS)
    _shot(tab, ui_server, "graph")


def test_quality_results_are_a_table_on_the_version_and_run_pages(tab: Tab, ui_server: UiServer) -> None:
    runs = _seed(ui_server)
    page = tab.page
    dataset = f"/datasets/{DBT}/jaffle.main.{ORDERS}"
    page.goto(dataset)
    version_links = page.locator("#version-list tbody tr td:first-child a")
    expect(version_links).to_have_count(2)
    page.locator("#version-list a", has_text="v1").click()
    rows = page.locator("#quality tbody tr")
    expect(rows).to_have_count(2)
    failed = page.locator("#quality tr[data-assertion='not_null']")
    expect(failed).to_have_attribute("data-success", "false")
    expect(failed.locator("td").nth(1)).to_have_text("email")
    expect(failed.locator("td").nth(2)).to_have_text("failed")
    expect(failed.locator("td").nth(4)).to_contain_text("read it")
    expect(failed.locator(f"a[href='/runs/{runs['test']}']")).to_have_count(1)
    _shot(tab, ui_server, "version")
    page.go_back()
    page.locator("#version-list a", has_text="v2").click()
    expect(page.locator("#no-quality")).to_be_visible()  # written after the test: none of its results

    page.goto(f"/datasets/{DBT}/checked_out")  # lotline's own checks, reported by the run that wrote it
    page.locator("#version-list a", has_text="v1").click()
    expect(page.locator("#quality tbody tr")).to_have_count(2)
    expect(page.locator("#quality tr[data-assertion='not_null'] td").nth(2)).to_have_text("failed")
    expect(page.locator("#quality tr[data-assertion='row_count'] td").nth(4)).to_contain_text("wrote it")

    page.goto(f"/runs/{runs['test']}")
    expect(page.locator("#quality tbody tr")).to_have_count(2)
    expect(page.locator("#quality tr[data-assertion='unique'] td").nth(2)).to_have_text("held")
    expect(page.locator("#quality tr[data-assertion='not_null'] td").nth(3)).to_have_text(
        f"jaffle.main.{ORDERS} v1"
    )
    _shot(tab, ui_server, "run")


def test_the_columns_page_lists_every_column_the_column_lineage_names(tab: Tab, ui_server: UiServer) -> None:
    _seed(ui_server)
    page = tab.page
    page.goto(f"/datasets/{DBT}/jaffle.main.{ORDERS}/columns")
    expect(page.locator("#columns tbody tr")).to_have_count(2)
    expect(page.locator("#col-customer_id td").nth(1)).to_have_text("INTEGER")
    expect(page.locator("#col-display_name [data-source]")).to_have_text(
        [f"{STG}.first_name", f"{STG}.last_name"]
    )
    _shot(tab, ui_server, "columns")


def test_the_new_pages_fit_a_narrow_screen(browser: Browser, ui_server: UiServer) -> None:
    """dbt's long names on the version and run pages wrap or scroll in their box, never the page."""
    runs = _seed(ui_server)
    listed = requests.get(
        f"{ui_server.url}/api/v1/namespaces/{DBT}/datasets/jaffle.main.{ORDERS}/versions", timeout=10
    )
    version = listed.json()["versions"][-1]["version"]  # the API catches up with the journal first
    context = browser.new_context(viewport={"width": 390, "height": 800}, base_url=ui_server.url)
    page = context.new_page()
    try:
        for path in (
            f"/?ns={DBT}",
            f"/datasets/{DBT}/jaffle.main.{ORDERS}/versions/{version}",
            f"/runs/{runs['test']}",
            f"/datasets/{DBT}/jaffle.main.{ORDERS}/columns",
        ):
            page.goto(path)
            assert page.evaluate("document.documentElement.scrollWidth") <= 390, path
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "columns-390.png"), full_page=True)
    finally:
        context.close()
