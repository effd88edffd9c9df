"""Graphs that open readable and stay so (issue 28, point 3): one side of a graph only (in the URL),
a node's branch collapsed and expanded, an overview in a corner, and a lot's lineage opened at the
deepest depth that draws quickly."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from support.lots import LotWorld
from web.conftest import Tab, UiServer, tap
from web.world import NS

CLEAN, RAW, LAND, CLEANED = (
    f"job:{NS}:clean",
    f"dataset:{NS}:raw",
    f"job:{NS}:land",
    f"dataset:{NS}:cleaned",
)


def _shown(tab: Tab) -> set[str]:
    return set(tab.page.evaluate("lotlineGraph.nodes(':visible').map(n => n.id())"))


def test_a_graph_shows_one_side_collapses_a_branch_and_has_an_overview(tab: Tab) -> None:
    """land -> raw -> clean -> cleaned, about clean."""
    page = tab.page
    page.goto(f"/lineage?node={CLEAN}&depth=2&dir=up")  # a shared link of the upstream view
    graph, direction, collapse = (
        page.locator("#graph"),
        page.locator("#graph-direction"),
        page.locator("#graph-collapse"),
    )
    expect(graph).to_have_attribute("data-visible", "3")
    expect(direction).to_have_value("up")
    assert _shown(tab) == {CLEAN, RAW, LAND}
    direction.select_option("down")
    expect(graph).to_have_attribute("data-visible", "2")
    assert _shown(tab) == {CLEAN, CLEANED}
    expect(page).to_have_url(re.compile(r"dir=down"))
    direction.select_option("both")
    expect(graph).to_have_attribute("data-visible", "4")
    expect(page).not_to_have_url(re.compile(r"dir="))

    expect(collapse).to_be_disabled()  # nothing chosen yet
    tap(page, RAW)
    collapse.click()  # what lies beyond raw, seen from clean: land
    expect(graph).to_have_attribute("data-visible", "3")
    assert _shown(tab) == {CLEAN, RAW, CLEANED}
    assert page.evaluate(f"lotlineGraph.getElementById('{RAW}').data('shown')").endswith("(+1 hidden)")
    expect(collapse).to_have_text("expand")
    collapse.click()
    expect(graph).to_have_attribute("data-visible", "4")

    overview = page.locator("#graph canvas.minimap")
    expect(overview).to_have_attribute("data-nodes", "4")
    before = page.evaluate("lotlineGraph.pan()")
    box = overview.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + 4, box["y"] + 4)  # the overview's corner: the view moves there
    assert page.evaluate("lotlineGraph.pan()") != before


def test_a_lot_lineage_opens_at_the_deepest_depth_that_draws_quickly(tab: Tab, ui_server: UiServer) -> None:
    """A day made of 24 hours of 12 five-minute lots each: 26 nodes at depth 1, 338 at depth 2."""
    lineage, day = ui_server.lineage, "20230101P1D000"
    world = LotWorld(lineage, "fan")
    world.job("five", output="m5")
    world.job("hour", output="h1", inputs=["m5"], mapping="PT5M->PT1H")
    world.job("day", output="d1", inputs=["h1"], mapping="PT1H->P1D")
    world.produce("five", *(f"20230101PT5M{n:03d}" for n in range(288)))
    world.produce("hour", *(f"20230101PT1H{n:03d}" for n in range(24)))
    world.produce("day", day)
    sizes = {}
    for depth in (1, 2):
        found = lineage.lot_lineage.of_lot("fan", "d1", day, depth=depth)
        sizes[depth] = len(found.lots) + len(found.runs)
    assert sizes[1] <= 200 < sizes[2]
    page = tab.page
    page.goto(f"/datasets/fan/d1/lots/{day}/lineage")
    expect(page.locator("#graph")).to_have_attribute("data-ready", str(sizes[1]))
    expect(page.locator("#depth-note")).to_contain_text("Opened at depth 1")
    expect(page.locator("select[name=depth]")).to_have_value("1")
    page.locator("select[name=depth]").select_option("2")  # asked for: that depth, whatever its size
    expect(page.locator("#graph")).to_have_attribute("data-ready", str(sizes[2]), timeout=30_000)
    expect(page.locator("#depth-note")).to_have_count(0)
