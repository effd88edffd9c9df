"""Live and shareable (issue 28, point 5): pages with lot state follow the lot event log without a
reload, and a filter applied in place is in the URL, so Back and a shared link show it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from support.lots import LotWorld
from web.conftest import Tab, UiServer
from web.world import NS

LIVE_NS = "live"
#: The servers (one per database) whose ``live`` namespace is seeded.
_SEEDED: set[str] = set()
_HOME_SEEDED: set[str] = set()


@pytest.fixture
def live(ui_server: UiServer) -> LotWorld:
    """A job of its own with lots 0 and 2 of a day made, 1 missing."""
    world = LotWorld(ui_server.lineage, LIVE_NS)
    if ui_server.url not in _SEEDED:
        world.job("feed", output="fed")
        world.produce("feed", "20230101PT1H000", "20230101PT1H002")
        _SEEDED.add(ui_server.url)
    return world


def test_the_grid_follows_lot_events_without_a_reload(tab: Tab, live: LotWorld) -> None:
    page = tab.page
    page.goto(f"/jobs/{LIVE_NS}/feed/lots?from=2023-01-01&to=2023-01-01T03:00:00Z")
    cell = page.locator("#grid a.c[data-lot='20230101PT1H001']")
    expect(cell).to_have_attribute("data-state", "missing")
    page.evaluate("window.notReloaded = true")
    live.produce("feed", "20230101PT1H001")  # a READY lot event
    expect(cell).to_have_attribute("data-state", "complete", timeout=30_000)
    expect(page.locator("#totals b[data-state=complete]")).to_have_text("3")
    assert page.evaluate("window.notReloaded === true")


def test_a_filter_is_in_the_url_so_back_and_links_show_it(tab: Tab, ui_server: UiServer) -> None:
    page = tab.page
    page.goto(f"/jobs/{NS}/clean")
    everything = page.locator("#run-list tbody tr").count()
    page.locator("#runs input[name=state][value=FAILED]").check()
    expect(page).to_have_url(re.compile(r"/jobs/ui/clean\?state=FAILED$"))
    expect(page.locator("#run-list tbody tr")).to_have_count(2)
    page.reload()  # as a shared link would open it
    expect(page.locator("#runs input[name=state][value=FAILED]")).to_be_checked()
    expect(page.locator("#run-list tbody tr")).to_have_count(2)
    page.go_back()
    expect(page).to_have_url(re.compile(r"/jobs/ui/clean$"))
    expect(page.locator("#run-list tbody tr")).to_have_count(everything)
    expect(page.locator("#runs input[name=state][value=FAILED]")).not_to_be_checked()


def test_the_start_page_follows_lot_events_without_a_reload(tab: Tab, ui_server: UiServer) -> None:
    """A job of its own in the ``live`` namespace: the last hours before now (21 and 23 of the
    world's last day) made, 22 missing, then made."""
    world = LotWorld(ui_server.lineage, LIVE_NS)
    if ui_server.url not in _HOME_SEEDED:
        world.job("home", output="homed")
        world.produce("home", "20230110PT1H021", "20230110PT1H023")
        _HOME_SEEDED.add(ui_server.url)
    page = tab.page
    page.goto(f"/?ns={LIVE_NS}")
    row = page.locator("#jobs tr[data-job=home]")
    expect(row.locator(".n[data-state=missing] b")).to_have_text("1")
    expect(row.locator(".n[data-state=complete] b")).to_have_text("2")
    page.evaluate("window.notReloaded = true")
    world.produce("home", "20230110PT1H022")
    expect(row.locator(".n[data-state=complete] b")).to_have_text("3", timeout=30_000)
    expect(row.locator(".n[data-state=missing]")).to_have_count(0)
    assert page.evaluate("window.notReloaded === true")


def test_a_dataset_s_filters_are_in_the_url(tab: Tab) -> None:
    page = tab.page
    page.goto(f"/datasets/{NS}/cleaned")
    everything = page.locator("#version-list tbody tr").count()
    page.locator("#versions input[name=state][value=failed]").check()  # swapped in place by htmx
    expect(page).to_have_url(re.compile(r"/datasets/ui/cleaned\?state=failed$"))
    expect(page.locator("#version-list tbody tr")).to_have_count(2)
    page.reload()
    expect(page.locator("#versions input[name=state][value=failed]")).to_be_checked()
    expect(page.locator("#version-list tbody tr")).to_have_count(2)
    page.go_back()
    expect(page).to_have_url(re.compile(r"/datasets/ui/cleaned$"))
    expect(page.locator("#version-list tbody tr")).to_have_count(everything)

    page.locator("#lot-list").scroll_into_view_if_needed()
    page.locator("input[name=lot_state][value=held]").check()  # the lots' filter: a plain link
    expect(page).to_have_url(re.compile(r"/datasets/ui/cleaned\?lot_state=held$"))
    expect(page.locator("#lot-list tbody tr")).to_have_count(1)
    expect(page.locator("#lot-list tbody")).to_contain_text("20230101PT1H013")
