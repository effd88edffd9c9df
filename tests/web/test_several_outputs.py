"""A job with several outputs (issue 39, point 1, its web half): every page counts the job's lots
once, and shows each output's health where the job is shown — its 3 lots published with warnings
on its second output are on the start page, the job page and the matrix."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from lotline.services.lots import OutputWritten
from support.lots import LotWorld
from web.conftest import Tab, UiServer
from web.test_health import counts_of
from web.test_interop import _shot

MULTI_NS = "multi"
LOTS = [f"20230101PT1H{n:03d}" for n in range(6)]
WARNED = {LOTS[1], LOTS[2], LOTS[4]}
WARNING = {
    "dataQualityAssertions": {
        "assertions": [{"assertion": "row_count", "success": False, "severity": "warn"}],
    }
}
#: The servers (one per database) whose ``multi`` namespace is seeded.
_SEEDED: set[str] = set()


def _seed(ui_server: UiServer) -> None:
    if ui_server.url in _SEEDED:
        return
    lineage = ui_server.lineage
    world = LotWorld(lineage, MULTI_NS)
    for dataset in ("main_out", "side_out"):
        lineage.catalog.upsert_dataset(MULTI_NS, dataset)
    lineage.lots.register_job(MULTI_NS, "split", output=["main_out", "side_out"])
    for lot in LOTS:
        claim = world.claim("split", lot)
        assert claim is not None
        side = OutputWritten(facets=WARNING if lot in WARNED else None)
        lineage.lots.complete(claim, outputs={"side_out": side})
    _SEEDED.add(ui_server.url)


def test_a_job_with_two_outputs_counts_its_lots_once_and_shows_each_outputs_health(
    tab: Tab, ui_server: UiServer
) -> None:
    _seed(ui_server)
    page = tab.page
    total = len(LOTS)
    page.goto(f"/?ns={MULTI_NS}")
    row = "#jobs tr[data-job=split]"
    shown = counts_of(page, row)
    report = ui_server.lineage.gaps.report(MULTI_NS, job="split")  # up to now, as the page
    assert shown["complete"] == total and sum(shown.values()) == report.total  # once, not per output
    side = page.locator(f"{row} .outputs li[data-output=side_out]")
    expect(side.locator("[data-warned]")).to_have_text("warned on 3 lots")
    expect(side.locator("[data-state=missing]")).to_have_text(f"missing {shown['missing']}")
    main = page.locator(f"{row} .outputs li[data-output=main_out]")
    expect(main.locator("[data-warned]")).to_have_count(0)

    page.goto(f"/jobs/{MULTI_NS}/split")
    assert counts_of(page, "#lot-health") == shown
    expect(page.locator("#lot-health .outputs li[data-output=side_out] [data-warned]")).to_have_attribute(
        "data-warned", "3"
    )

    page.goto(f"/jobs/{MULTI_NS}/split/lots?from=2023-01-01&to=2023-01-01T06:00:00Z")
    expect(page.locator("#totals b[data-state=complete]")).to_have_text(str(total))

    page.goto(f"/lots?ns={MULTI_NS}&from=2023-01-01&to=2023-01-01T06:00:00Z")
    badge = page.locator("#matrix tr[data-job=split] th [data-output=side_out]")
    expect(badge).to_have_text("warned on 3 lots (output side_out)")
    expect(page.locator("#matrix tr[data-job=split] th [data-output=main_out]")).to_have_count(0)  # all done


def test_the_grid_of_a_job_with_two_outputs_offers_each_output_and_draws_the_one_chosen(
    tab: Tab, ui_server: UiServer
) -> None:
    """The grid page speaks of both outputs: its choice says side_out warned on 3 lots, and chosen,
    the grid draws side_out's lots with their warning dots; an output the job lacks is refused."""
    _seed(ui_server)
    page = tab.page
    grid = f"/jobs/{MULTI_NS}/split/lots"
    window = "from=2023-01-01&to=2023-01-01T06:00:00Z"
    page.goto(f"{grid}?{window}")
    choice = page.locator("#outputs")
    main, side = (choice.locator(f"a[data-output={name}]") for name in ("main_out", "side_out"))
    expect(main).to_have_attribute("aria-current", "true")  # the first output, as every page counts
    expect(main).to_contain_text("all done")
    expect(side.locator("[data-warned]")).to_have_text("warned on 3 lots")
    expect(page.locator("#grid")).to_have_attribute("data-dataset", "main_out")
    expect(page.locator("#grid a.c[data-warned]")).to_have_count(0)

    side.click()
    expect(page).to_have_url(re.compile(r"output=side_out"))
    expect(page.locator("#grid")).to_have_attribute("data-dataset", "side_out")
    expect(page.locator("#outputs a[data-output=side_out]")).to_have_attribute("aria-current", "true")
    warned = page.locator("#grid a.c[data-warned]")
    expect(warned).to_have_count(len(WARNED))
    assert {cell.get_attribute("data-lot") for cell in warned.all()} == WARNED
    expect(page.locator("#totals b[data-state=complete]")).to_have_text(str(len(LOTS)))
    _shot(tab, ui_server, "grid-outputs")
    page.locator("#grid a.c[data-lot='20230101PT1H001']").click()  # its panel is side_out's lot
    expect(page.locator("#lot-panel h2")).to_contain_text("of side_out")
    page.locator("form.range button[type=submit], form.range input[type=submit]").first.click()
    expect(page).to_have_url(re.compile(r"output=side_out"))  # a new range keeps the output chosen

    answer = page.goto(f"{grid}?{window}&output=nope")
    assert answer is not None and answer.status == 400
    refused = "split has no output 'nope': its outputs are main_out, side_out."
    expect(page.locator("#range-error")).to_contain_text(refused)
