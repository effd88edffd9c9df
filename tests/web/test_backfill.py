"""The grid's range backfill (issue 28, point 4): a dry run first, shown as what it would do, with
the token; nothing changes until the operator confirms."""

from __future__ import annotations

from playwright.sync_api import expect

from api.conftest import TOKEN
from web.conftest import Tab, UiServer
from web.world import DAY, NEXT_DAY, NS


def test_a_range_backfill_previews_what_it_would_reopen(tab: Tab, ui_server: UiServer) -> None:
    page = tab.page
    page.goto(f"/jobs/{NS}/land/lots?from={DAY}&to={NEXT_DAY}")
    page.locator("#token").fill(TOKEN)
    page.locator("#token-form button").click()
    expect(page.locator("#token-state")).to_have_text("token set")
    page.locator("#backfill summary").click()
    expect(page.locator("#backfill")).to_contain_text("Blocked, held and running lots are left")
    before = ui_server.world.table()
    run = page.locator("[data-backfill=run]")
    expect(run).to_be_disabled()  # nothing runs before its preview
    page.locator("[data-backfill=preview]").click()
    plan = page.locator("#backfill-plan")
    expect(plan).to_contain_text("Would reopen 0 complete lots")
    expected = ui_server.lineage.gaps.backfill(
        NS, "land", start=DAY, end=NEXT_DAY, only=["missing,failed"], dry_run=True
    )
    queued = sum(r.count for r in expected.hinted + expected.unhinted)
    assert queued == 3  # raw 03 (reopened), 22 (failed), 23 (never made)
    expect(plan).to_have_attribute("data-queued", str(queued))
    expect(run).to_be_enabled()
    assert ui_server.world.table() == before  # a preview changes nothing

    page.locator("#backfill input[name=only]").uncheck()  # every lot: the complete ones reopen
    page.locator("[data-backfill=preview]").click()
    everything = ui_server.lineage.gaps.backfill(NS, "land", start=DAY, end=NEXT_DAY, dry_run=True)
    reopened = sum(r.count for r in everything.reopened)
    expect(plan).to_have_attribute("data-reopened", str(reopened))
    expect(plan).to_have_attribute("data-cascaded", str(everything.cascaded))
    assert reopened == 21 and ui_server.world.table() == before  # 20 complete and 1 empty
