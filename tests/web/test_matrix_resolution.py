"""The matrix keeps each job's own resolution (issue 39, point 11): a daily job beside hourly ones
no longer turns a 3-hour range into one cell per day — its day spans the hour columns it covers;
a resolution that cannot be drawn keeps the form with the reason; a wide matrix opens on its
latest trouble, not on the quiet start of its range."""

from __future__ import annotations

from playwright.sync_api import expect

from support.lots import LotWorld
from web.conftest import Tab, UiServer

MIXED_NS, ODD_NS = "mixed", "odd"
THREE_HOURS = "from=2023-01-01T00:00:00Z&to=2023-01-01T03:00:00Z"
#: The servers (one per database) whose namespaces of this file are seeded.
_SEEDED: set[str] = set()


def _seed(ui_server: UiServer) -> None:
    if ui_server.url in _SEEDED:
        return
    mixed = LotWorld(ui_server.lineage, MIXED_NS)
    mixed.job("hourly", output="hours")
    mixed.job("daily", output="days")
    mixed.produce("hourly", *(f"20230101PT1H{n:03d}" for n in range(6)))
    mixed.produce("daily", "20230101P1D000")
    odd = LotWorld(ui_server.lineage, ODD_NS)
    odd.job("hourly", output="hours")
    odd.job("quarters", output="threes")
    odd.produce("hourly", "20230101PT1H000")
    odd.produce("quarters", "20230101PT45M000")
    _SEEDED.add(ui_server.url)


def test_a_daily_row_spans_the_hour_columns_of_its_day(tab: Tab, ui_server: UiServer) -> None:
    _seed(ui_server)
    page = tab.page
    for res in ("", "&res=lot", "&res=hour"):
        answer = page.goto(f"/lots?ns={MIXED_NS}&{THREE_HOURS}{res}")
        assert answer is not None and answer.status == 200, res
        hours = page.locator("#matrix tr[data-job=hourly] a.c")
        expect(hours).to_have_count(3)  # one cell per hour, not one per day
        day = page.locator("#matrix tr[data-job=daily] a.c")
        expect(day).to_have_count(1)
        expect(day).to_have_attribute("data-columns", "3")
        expect(day).to_have_attribute("data-lot", "20230101P1D000")
        first, last, wide = hours.first.bounding_box(), hours.last.bounding_box(), day.bounding_box()
        assert first and last and wide
        assert wide["x"] == first["x"] and wide["x"] + wide["width"] == last["x"] + last["width"], res
    said = page.locator(".muted").filter(has_text="a longer lot spans the columns it covers")
    expect(said).to_have_count(1)


def test_a_refused_resolution_keeps_the_form_with_the_reason(tab: Tab, ui_server: UiServer) -> None:
    _seed(ui_server)
    page = tab.page
    answer = page.goto(f"/lots?ns={ODD_NS}&{THREE_HOURS}&res=lot")
    assert answer is not None and answer.status == 400
    expect(page.locator("#range-error")).to_contain_text("PT1H lots do not fill whole columns of 45 minutes")
    expect(page.locator("form.range input[name=from]")).to_have_value("2023-01-01T00:00:00Z")
    expect(page.locator("form.range select[name=res]")).to_have_value("lot")
    page.locator("form.range select[name=res]").select_option("")
    page.locator("form.range button[type=submit]").click()
    expect(page.locator("#matrix tr[data-job=quarters] a.c")).not_to_have_count(0)


def test_a_wide_matrix_opens_on_its_latest_trouble(tab: Tab, ui_server: UiServer) -> None:
    _seed(ui_server)
    page = tab.page
    page.goto(f"/lots?ns={MIXED_NS}&from=2023-01-01&to=2023-01-08&res=lot")  # 168 columns, 6 hours made
    wrap = page.locator("#matrix-wrap")
    expect(wrap).to_have_attribute("data-opened", "2023-01-07T23:00:00+00:00")  # the last missing hour
    assert page.evaluate("document.getElementById('matrix-wrap').scrollLeft") > 0


CALENDAR_NS = "calendar"
_CALENDAR_SEEDED: set[str] = set()


def test_a_monthly_row_spans_the_day_columns_of_its_month(tab: Tab, ui_server: UiServer) -> None:
    """Issue 40: a month beside days is one cell over its 28 (February) or 31 day columns."""
    if ui_server.url not in _CALENDAR_SEEDED:
        world = LotWorld(ui_server.lineage, CALENDAR_NS)
        world.job("daily", output="days")
        world.job("monthly", output="months")
        world.produce("daily", *(f"202202{d:02d}P1D000" for d in range(1, 29)), "20220301P1D000")
        world.produce("monthly", "20220201P1M000")
        _CALENDAR_SEEDED.add(ui_server.url)
    page = tab.page
    answer = page.goto(f"/lots?ns={CALENDAR_NS}&from=2022-02-01&to=2022-04-01&res=day")
    assert answer is not None and answer.status == 200
    days = page.locator("#matrix tr[data-job=daily] a.c")
    expect(days).to_have_count(59)
    months = page.locator("#matrix tr[data-job=monthly] a.c")
    expect(months).to_have_count(2)
    february, march = months.first, months.last
    expect(february).to_have_attribute("data-lot", "20220201P1M000")
    expect(february).to_have_attribute("data-columns", "28")
    expect(march).to_have_attribute("data-columns", "31")
    first, last, wide = days.first.bounding_box(), days.nth(27).bounding_box(), february.bounding_box()
    assert first and last and wide
    assert wide["x"] == first["x"] and wide["x"] + wide["width"] == last["x"] + last["width"]
    # What counts lots per day (the start page's health bars, the job's page, the freshness
    # metrics) counts months as months: each answers, with February done.
    for path in (
        f"/?ns={CALENDAR_NS}",
        f"/jobs/{CALENDAR_NS}/monthly",
        f"/datasets/{CALENDAR_NS}/months",
        f"/jobs/{CALENDAR_NS}/monthly/lots",
        f"/lots?ns={CALENDAR_NS}",
        "/metrics",
    ):
        answer = page.goto(path)
        assert answer is not None and answer.status == 200, path
    page.goto(f"/?ns={CALENDAR_NS}")
    expect(page.locator("#jobs tr[data-job=monthly] .n[data-state=complete] b")).to_have_text("1")


ZONED_NS = "zonedmix"
_ZONED_SEEDED: set[str] = set()
#: March 2022 to the 19th: New York springs forward on the 13th (a day of 23 hours).
MARCH = range(1, 20)


def test_new_york_days_sit_in_the_utc_day_columns_most_of_them_lies_in(tab: Tab, ui_server: UiServer) -> None:
    """A New York day (05:00 to 05:00 UTC, 04:00 after the 13th) beside UTC days: one cell per
    column, each in the column of its own date, none overlapping the next; a job with no lots yet
    says so; scrolled to its latest trouble, a wide matrix keeps its rows' names in sight."""
    if ui_server.url not in _ZONED_SEEDED:
        world = LotWorld(ui_server.lineage, ZONED_NS)
        world.job("utc_days", output="days")
        world.job("ny_days", output="nydays")
        world.job("later", inputs=["nothing_yet"], output="laters", mapping="PT1H->P1D")
        world.produce("utc_days", *(f"202203{d:02d}P1D000" for d in MARCH))
        world.produce("ny_days", *(f"202203{d:02d}P1D.America.New_York.000" for d in MARCH))
        _ZONED_SEEDED.add(ui_server.url)
    page = tab.page
    answer = page.goto(f"/lots?ns={ZONED_NS}&from=2022-03-01&to=2022-03-20")
    assert answer is not None and answer.status == 200
    utc = page.locator("#matrix tr[data-job=utc_days] a.c")
    ny = page.locator("#matrix tr[data-job=ny_days] a.c")
    expect(utc).to_have_count(len(MARCH))
    expect(ny).to_have_count(len(MARCH))
    for n in range(len(MARCH)):
        day, local = utc.nth(n).bounding_box(), ny.nth(n).bounding_box()
        assert day and local and (local["x"], local["width"]) == (day["x"], day["width"]), n
    assert ny.nth(12).get_attribute("data-lot") == "20220313P1D.America.New_York.000"

    page.goto(f"/lots?ns={ZONED_NS}")  # from March to the world's now: opens on its latest trouble
    expect(page.locator("#matrix tr[data-job=later] th")).to_contain_text("no lots yet")  # as its health
    wrap = page.locator("#matrix-wrap")
    assert page.evaluate("document.getElementById('matrix-wrap').scrollLeft") > 0
    name, box = page.locator("#matrix tr[data-job=ny_days] th a"), wrap.bounding_box()
    seen = name.bounding_box()
    assert seen and box and box["x"] <= seen["x"] < box["x"] + box["width"] / 2
    expect(page.locator("#matrix .blank[style*='-']")).to_have_count(0)  # no negative gap
