"""No silent failure, no broken layout (issue 28, point 6): a part of a page that fails says so in
place; a bad range keeps the form and says what is wrong; unknown pages and lots are 404 pages;
every page is usable at 390 and 900 px wide."""

from __future__ import annotations

import pytest
import requests
from playwright.sync_api import Browser, Route, expect

from web.conftest import Tab, UiServer
from web.world import NS, hour


def test_a_failed_filter_and_a_failed_lot_panel_say_so_in_place(tab: Tab, ui_server: UiServer) -> None:
    page = tab.page
    page.goto(f"/jobs/{NS}/clean")
    page.locator("#runs input[name=lot]").fill("../")  # refused by the server: 400
    page.locator("#runs").get_by_role("button", name="Filter").click()
    expect(page.locator("#runs .partial-error")).to_contain_text("lot id '../' contains '/'")

    def unreachable(route: Route) -> None:
        route.abort()

    page.goto(f"/jobs/{NS}/land/lots?from=2023-01-01&to=2023-01-02")
    page.route(f"**/lots/{hour(5)}", unreachable)
    page.locator(f"#grid a.c[data-lot='{hour(5)}']").click()
    expect(page.locator("#lot-panel .partial-error")).to_contain_text("Could not reach the server")
    # htmx logs the request this test made fail (htmx:sendError, htmx:afterRequest): expected here
    tab.errors[:] = [e for e in tab.errors if not e.startswith("htmx:")]


def test_a_bad_range_keeps_the_form_and_says_what_is_wrong(tab: Tab) -> None:
    page = tab.page
    answer = page.goto(f"/jobs/{NS}/clean/lots?from=yesterday&to=2023-01-02")
    assert answer is not None and answer.status == 400
    expect(page.locator("input[name=from]")).to_have_value("yesterday")
    expect(page.locator("input[name=to]")).to_have_value("2023-01-02")
    expect(page.locator("#range-error")).to_contain_text("from 'yesterday' is not an RFC 3339 instant")
    page.locator("input[name=from]").fill("2023-01-01T00:00")  # no zone: UTC
    page.locator("input[name=to]").fill("2023-01-01T12:00")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#grid a.c[data-lot]")).to_have_count(12)
    expect(page.locator("input[name=from]")).to_have_value("2023-01-01 00:00:00")  # as every page shows times
    page.get_by_role("button", name="Show").click()  # and read back as it is shown
    expect(page.locator("#grid a.c[data-lot]")).to_have_count(12)
    expect(page.locator("input[name=to]")).to_have_value("2023-01-01 12:00:00")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/nowhere", "There is no page at /nowhere"),
        ("/jobs", "There is no page at /jobs"),
        (f"/datasets/{NS}/cleaned/lots/{hour(99)}", "not found"),  # malformed
        (f"/datasets/{NS}/cleaned/lots/not-a-lot", "not found"),  # no lot of this dataset
        (f"/datasets/{NS}/cleaned/lots/20230101PT5M007", "not found"),  # another interval's
    ],
)
def test_unknown_pages_and_lots_are_the_html_404_page(ui_server: UiServer, path: str, message: str) -> None:
    answer = requests.get(ui_server.url + path, timeout=10)
    assert answer.status_code == 404
    assert "text/html" in answer.headers["content-type"]
    assert message in answer.text
    assert "data-action" not in answer.text  # no buttons acting on what does not exist


def test_the_api_keeps_its_json_404_and_a_due_lot_keeps_its_page(ui_server: UiServer) -> None:
    answer = requests.get(ui_server.url + "/api/v1/nowhere", timeout=10)
    assert (answer.status_code, answer.json()["code"]) == (404, 404)
    due = requests.get(f"{ui_server.url}/datasets/{NS}/cleaned/lots/{hour(20)}", timeout=10)
    assert due.status_code == 200  # untouched, but due: a missing cell opens it
    assert "no job has claimed or registered this lot" in due.text


PAGES = [
    f"/?ns={NS}",
    f"/jobs/{NS}/clean",
    f"/datasets/{NS}/cleaned",
    f"/jobs/{NS}/clean/lots?from=2023-01-01&to=2023-01-02",
    f"/datasets/{NS}/cleaned/lots/{hour(11)}",
    f"/lineage?node=job:{NS}:clean",
    f"/datasets/{NS}/cleaned/lots/{hour(1)}/lineage",
    f"/lots?ns={NS}",
    f"/events?ns={NS}",
]


@pytest.mark.parametrize("width", [390, 900])
def test_every_page_fits_a_narrow_screen(browser: Browser, ui_server: UiServer, width: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": 800}, base_url=ui_server.url)
    page = context.new_page()
    try:
        for path in PAGES:
            page.goto(path)
            assert page.evaluate("document.documentElement.scrollWidth") <= width, path  # no sideways page
        page.goto(f"/lineage?node=job:{NS}:clean")
        expect(page.locator("#graph")).to_have_attribute("data-ready", "4")
        graph, panel = page.locator("#graph").bounding_box(), page.locator("#node-details").bounding_box()
        assert graph is not None and panel is not None
        assert graph["y"] + graph["height"] <= panel["y"]  # stacked: the graph above its panel
        assert graph["width"] > width * 0.8
    finally:
        context.close()
