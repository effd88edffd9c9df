"""Stale lots in the web UI (issue 40.3), in headless Chromium on both databases: the grid draws
them with their own mark and totals, a lot's panel says which version made it, the matrix and the
start page count them alike, and the range dialog offers them to backfill."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from support.lots import LotWorld
from web.conftest import Tab, UiServer
from web.test_health import counts_of, grid_totals

STALE_NS = "stale"
RANGE = "from=2023-01-01&to=2023-01-01T04:00:00Z"
_SEEDED: set[str] = set()


def _seed(world: LotWorld) -> None:
    """clean: hours 00-01 made by its version 1, 02 by version 2 (its code changed); 03 missing."""
    world.job("land", output="raw")
    world.lineage.catalog.upsert_dataset(world.ns, "cleaned")
    world.lots.register_job(world.ns, "clean", output="cleaned", inputs=["raw"], code_digest="one")
    world.produce("land", *(f"20230101PT1H{n:03d}" for n in range(4)))
    world.produce("clean", "20230101PT1H000", "20230101PT1H001")
    world.lots.register_job(world.ns, "clean", output="cleaned", inputs=["raw"], code_digest="two")
    world.produce("clean", "20230101PT1H002")


@pytest.fixture
def seeded(ui_server: UiServer) -> UiServer:
    """The server, its ``stale`` namespace seeded once per database."""
    if ui_server.url not in _SEEDED:
        _seed(LotWorld(ui_server.lineage, STALE_NS))
        _SEEDED.add(ui_server.url)
    return ui_server


def test_the_grid_marks_stale_lots_and_their_panel_names_the_versions(tab: Tab, seeded: UiServer) -> None:
    page = tab.page
    page.goto(f"/jobs/{STALE_NS}/clean/lots?{RANGE}")
    cells = page.locator("#grid a.c[data-lot]")
    states = cells.evaluate_all("cs => cs.map(c => c.dataset.state)")
    assert states == ["stale", "stale", "complete", "missing"]
    stale = page.locator("#grid a.c.s-stale")
    expect(stale).to_have_count(2)
    complete = page.locator("#grid a.c.s-complete").first
    assert stale.first.evaluate("c => getComputedStyle(c).backgroundImage") != complete.evaluate(
        "c => getComputedStyle(c).backgroundImage"
    )  # a mark of its own, not complete's
    assert grid_totals(page)["stale"] == 2
    expect(page.locator("#legend")).to_contain_text("made by an older version of its job")
    stale.first.click()
    told = page.locator("#lot-state")
    expect(told).to_have_attribute("data-state", "stale")
    expect(told).to_contain_text("stale: made by version 1, now 2")
    options = page.locator("#backfill select[name=only] option")
    assert "stale" in options.evaluate_all("os => os.map(o => o.value)")


def test_the_matrix_and_the_start_page_count_stale_lots(tab: Tab, seeded: UiServer) -> None:
    page = tab.page
    page.goto(f"/lots?ns={STALE_NS}&{RANGE}&res=lot")
    row = page.locator("#matrix tr[data-job=clean] a.c")
    assert row.evaluate_all("cs => cs.map(c => c.dataset.state)")[:3] == ["stale", "stale", "complete"]
    page.goto(f"/?ns={STALE_NS}")
    assert counts_of(page, "#jobs tr[data-job=clean]").get("stale") == 2
