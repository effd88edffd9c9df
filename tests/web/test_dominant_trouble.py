"""An aggregated cell names its dominant trouble (issue 39, point 12): its body shows what most of
its lots that are not done are, its corner the most urgent of them — a day of 23 missing lots and
1 failed one is hatched (missing) with a red corner, not tinted failed."""

from __future__ import annotations

from playwright.sync_api import expect

from support.lots import LotWorld
from support.png import pixels, share
from web.conftest import Tab, UiServer
from web.world import DAY, ERROR, NEXT_DAY

DOMINANT_NS = "dominant"
HATCH, RED, FAILED_TINT = (160, 174, 192), (197, 48, 48), (254, 178, 178)
#: The servers (one per database) whose ``dominant`` namespace is seeded.
_SEEDED: set[str] = set()


def test_a_mostly_missing_day_with_one_failed_lot_reads_missing_flagged_failed(
    tab: Tab, ui_server: UiServer
) -> None:
    if ui_server.url not in _SEEDED:
        world = LotWorld(ui_server.lineage, DOMINANT_NS)
        world.job("src", output="s")
        claim = world.claim("src", "20230101PT1H000")
        assert claim is not None
        ui_server.lineage.lots.fail(claim, error=ERROR)  # the other 23 hours: never made, missing
        _SEEDED.add(ui_server.url)
    page = tab.page
    page.goto(f"/jobs/{DOMINANT_NS}/src/lots?from={DAY}&to={NEXT_DAY}&res=day")
    cell = page.locator("#grid a.c")
    expect(cell).to_have_count(1)
    expect(cell).to_have_attribute("data-mark", "failed")  # the corner: the most urgent
    expect(cell).to_have_attribute("data-body", "missing")  # the body: what most of it is
    expect(cell).to_have_attribute("title", "2023-01-01 00:00:00: 0 % done — failed 1, missing 23")
    image = pixels(cell.screenshot(animations="disabled"))
    assert share(image, HATCH, 30) > 0.2, "the body is hatched: mostly missing"
    assert share(image, FAILED_TINT, 10) == 0, "not a failed day"
    assert 0 < share(image, RED) < 0.2, "the failed lot flags the corner"
    expect(page.locator("#legend")).to_contain_text("mostly missing, one failed")
