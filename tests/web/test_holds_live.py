"""Holds are live and the buttons say what they can do (issue 39, point 10): an open page follows
holds and releases as it follows lot events; of "hold job" and "release job" only the one that
applies is enabled; the backfill's Preview needs the token and says so, and a refused token reads
as words, not a bare 401."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from api.conftest import TOKEN
from web.conftest import Tab, UiServer
from web.world import DAY, GRID_NS, NEXT_DAY, NS, hour


def test_an_open_start_page_follows_holds_and_releases(tab: Tab, ui_server: UiServer) -> None:
    page, lots = tab.page, ui_server.lineage.lots
    page.goto(f"/?ns={GRID_NS}")
    held = page.locator("#jobs tr[data-job=fine] [data-held=true]")
    expect(held).to_have_count(0)
    page.evaluate("window.notReloaded = true")
    lots.hold_job(GRID_NS, "fine")
    try:
        expect(held).to_be_visible(timeout=30_000)  # no lot event: the poll asks for the holds
        page.goto(f"/lots?ns={GRID_NS}")
        expect(page.locator("#matrix tr[data-job=fine] [data-held=true]")).to_be_visible()
        page.goto(f"/?ns={GRID_NS}")
        expect(held).to_be_visible()
        page.evaluate("window.notReloaded = true")
    finally:
        lots.release_job(GRID_NS, "fine")
    expect(held).to_have_count(0, timeout=30_000)
    assert page.evaluate("window.notReloaded === true")


def _use_token(tab: Tab) -> None:
    tab.page.locator("#token").fill(TOKEN)
    tab.page.locator("#token-form button").click()
    expect(tab.page.locator("#token-state")).to_have_text("token set")


def test_only_the_button_that_applies_is_enabled(tab: Tab, ui_server: UiServer) -> None:
    page, lots = tab.page, ui_server.lineage.lots
    page.goto(f"/jobs/{GRID_NS}/late")
    _use_token(tab)
    hold, release = (page.get_by_role("button", name=name) for name in ("hold job", "release job"))
    expect(hold).to_be_enabled()
    expect(release).to_be_disabled()
    expect(release).to_have_attribute("title", re.compile("is not held: there is nothing to release"))
    page.on("dialog", lambda dialog: dialog.accept())
    try:
        hold.click()
        expect(page.locator("h1 [data-held=true]")).to_be_visible()
        expect(hold).to_be_disabled()
        expect(hold).to_have_attribute("title", re.compile("already held"))
        expect(release).to_be_enabled()
        assert lots.held_jobs(GRID_NS) == ["late"]
        lots.release_job(GRID_NS, "late")  # elsewhere: the open page follows
        expect(page.locator("h1 [data-held=true]")).to_have_count(0, timeout=30_000)
        expect(hold).to_be_enabled()
        expect(release).to_be_disabled()
    finally:
        if lots.held_jobs(GRID_NS):
            lots.release_job(GRID_NS, "late")


def test_the_backfill_preview_needs_the_token_and_a_refusal_reads_as_words(tab: Tab) -> None:
    page = tab.page
    page.goto(f"/jobs/{NS}/land/lots?from={DAY}&to={NEXT_DAY}")
    page.locator("#backfill summary").click()
    preview = page.locator("[data-backfill=preview]")
    expect(preview).to_be_disabled()
    expect(page.locator("#backfill-hint")).to_have_text(re.compile("Set the API token .* to preview"))
    # a token kept before the server changed it: the preview is refused, and says why in words
    page.evaluate("sessionStorage.setItem('lotline-token', 'an-old-token')")
    page.reload()
    page.locator("#backfill summary").click()
    expect(preview).to_be_enabled()
    expect(page.locator("#backfill-hint")).to_have_text("")
    preview.click()
    plan = page.locator("#backfill-plan")
    expect(plan).to_contain_text("the server refused the API token (401): set the right one")
    expect(plan).not_to_contain_text("Unauthorized")


def test_a_lot_panel_enables_only_hold_or_release_whichever_applies(tab: Tab, ui_server: UiServer) -> None:
    """cleaned hour 13 is held: only release; hour 4 is complete: only hold, and once held, only release."""
    page, lots = tab.page, ui_server.lineage.lots
    page.goto(f"/jobs/{NS}/clean/lots?from={DAY}&to={NEXT_DAY}")
    _use_token(tab)
    panel = page.locator("#lot-panel")
    hold, release = (panel.get_by_role("button", name=name, exact=True) for name in ("hold", "release"))

    page.locator(f"#grid a.c[data-lot='{hour(13)}']").click()
    expect(panel.locator("h2")).to_contain_text(hour(13))
    expect(hold).to_be_disabled()
    expect(hold).to_have_attribute("title", re.compile("is already held: release it"))
    expect(release).to_be_enabled()

    page.locator(f"#grid a.c[data-lot='{hour(4)}']").click()
    expect(panel.locator("h2")).to_contain_text(hour(4))
    expect(hold).to_be_enabled()
    expect(release).to_be_disabled()
    expect(release).to_have_attribute("title", re.compile("is not held: there is nothing to release"))
    try:
        hold.click()
        expect(page.locator(f"#grid a.c[data-lot='{hour(4)}']")).to_have_attribute("data-state", "held")
        expect(hold).to_be_disabled()
        expect(release).to_be_enabled()
        release.click()
        expect(page.locator(f"#grid a.c[data-lot='{hour(4)}']")).to_have_attribute("data-state", "complete")
        expect(hold).to_be_enabled()
        expect(release).to_be_disabled()
    finally:
        if any(r.lot == hour(4) and r.status.value == "HOLD" for r in lots.status(NS, dataset="cleaned")):
            lots.release_lot(NS, "cleaned", hour(4))
