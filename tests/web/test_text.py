"""Times and errors as a reader sees them (issue 28, point 7): every instant a page shows is in one
format (``2024-05-01 08:00:00``, UTC), whatever it came from (a column, an OpenLineage
``eventTime`` with a zone and fractions of a second); a long error wraps inside its box."""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import Browser, Page, expect

from api.conftest import TOKEN
from support.lots import LotWorld
from web.conftest import Tab, UiServer
from web.world import NS, hour, send_event

SHOWN = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
#: What a time in another format looks like in a page's text: ISO's ``T``, a zone, fractions.
OTHER_FORMAT = re.compile(r"\d\dT\d\d:\d\d|\d\d:\d\d:\d\d[.,]\d|[+-]\d\d:\d\d\b|\d\d:\d\d:\d\dZ")
TIMES = "times"
WRAP = "wrap"
#: An error as long as a real one: words, and a path with no space to break at.
LONG_ERROR = "ValueError: record 1234 has a malformed field 'status' in the input file " * 6 + (
    "s3://bucket/" + "landing/2023/01/01/" * 12 + "part-0.parquet"
)


def _times_of(page: Page, path: str) -> list[str]:
    page.goto(path)
    shown = page.locator("time").all_inner_texts()
    text = page.evaluate("document.querySelector('main').innerText")
    assert OTHER_FORMAT.findall(text) == [], path
    return shown


def test_every_time_shown_has_one_format(tab: Tab, ui_server: UiServer) -> None:
    run_id = str(uuid.uuid4())
    send_event(
        ui_server.url,
        TOKEN,
        eventType="START",
        eventTime="2024-05-01T10:00:00.123456+02:00",  # a zone and microseconds: shown in UTC
        run={"runId": run_id},
        job={"namespace": TIMES, "name": "stamp"},
    )
    failed = ui_server.lineage.runs.list_runs(NS, "clean").items[0]
    pages = [
        f"/events?run={run_id}",
        f"/runs/{failed.id}",
        f"/?ns={NS}",
        f"/jobs/{NS}/clean",
        f"/datasets/{NS}/cleaned",
        f"/datasets/{NS}/cleaned/lots/{hour(11)}",
        "/search?q=clean",
    ]
    shown = {path: _times_of(tab.page, path) for path in pages}
    assert shown[f"/events?run={run_id}"] == ["2024-05-01 08:00:00"]
    # a time typed as the pages show it filters (UTC)
    for after, count in (("2024-05-01 07:59:59", 1), ("2024-05-01 08:00:01", 0)):
        tab.page.goto(f"/events?run={run_id}&after={after}")
        expect(tab.page.locator("#event-list time")).to_have_count(count)
    for path, times in shown.items():
        assert times, f"{path} shows no time"
        assert [t for t in times if not SHOWN.fullmatch(t)] == [], path


def _long_failure(ui_server: UiServer) -> str:
    """A failed run of ``wrap`` with ``LONG_ERROR``, made once per server; answers its id."""
    world = LotWorld(ui_server.lineage, WRAP)
    world.job("long", output="longs")
    found = ui_server.lineage.runs.list_runs(WRAP, "long").items
    if not found:
        claim = world.claim("long", hour(0))
        assert claim is not None
        ui_server.lineage.lots.fail(claim, error=LONG_ERROR)
        found = ui_server.lineage.runs.list_runs(WRAP, "long").items
    return str(found[0].id)


@pytest.mark.parametrize("width", [390, 900])
def test_a_long_error_wraps_within_its_box(browser: Browser, ui_server: UiServer, width: int) -> None:
    run_id = _long_failure(ui_server)
    context = browser.new_context(viewport={"width": width, "height": 800}, base_url=ui_server.url)
    page = context.new_page()
    try:
        page.goto(f"/runs/{run_id}")
        error = page.locator("#run-error")
        expect(error).to_contain_text("part-0.parquet")
        box = error.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width
        # wrapped: nothing of it is out of its box (no scroll bar to find the end of the message)
        assert page.evaluate("(e) => e.scrollWidth <= e.clientWidth", error.element_handle())
        assert page.evaluate("document.documentElement.scrollWidth") <= width

        page.goto(f"/jobs/{WRAP}/long?state=FAILED")
        cell = page.locator("#run-list .error-cell").first
        expect(cell).to_contain_text("ValueError")
        size = cell.bounding_box()
        assert size is not None and size["width"] >= 150  # a column to read, not a word per line
        assert page.evaluate("(e) => e.scrollWidth <= e.clientWidth", cell.element_handle())
        assert page.evaluate("document.documentElement.scrollWidth") <= width  # its table scrolls instead
    finally:
        context.close()
