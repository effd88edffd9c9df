"""The lot grid as an operator sees it (issue 28, point 2): aggregated cells show how much is done
and flag what is not, missing and empty lots look different at cell size, a day of five-minute
lots is 24 rows of 12 on a time axis, arrow keys move between cells, and the grid draws no cell
where no lot is due (before the first lot, after now)."""

from __future__ import annotations

import datetime

from playwright.sync_api import Locator, expect

from support.lots import LotWorld
from support.png import pixels, share
from web.conftest import Tab, UiServer
from web.world import DAY, EXPECTED_CLEAN, GRID_DAYS, GRID_NS, NEXT_DAY, NOT_DONE, NOW, NS

GREEN, RED, HATCH, WHITE = (46, 133, 64), (197, 48, 48), (160, 174, 192), (255, 255, 255)
TEN_DAYS = f"?from={DAY}&to=2023-01-{GRID_DAYS + 1:02d}"
MINUTES_NS = "minutes"
#: The servers whose world has ``MINUTES_NS`` (seeded by the first test that needs it).
_MINUTES_SEEDED: set[str] = set()


def look(cell: Locator) -> list[list[tuple[int, int, int]]]:
    return pixels(cell.screenshot(animations="disabled"))


def test_days_of_a_mostly_done_job_read_green_and_flag_what_is_not(tab: Tab, ui_server: UiServer) -> None:
    page = tab.page
    page.goto(f"/jobs/{GRID_NS}/hourly/lots{TEN_DAYS}&res=day")
    cells = page.locator("#grid a.c")
    expect(cells).to_have_count(GRID_DAYS)
    end = f"2023-01-{GRID_DAYS + 1:02d}"
    report = ui_server.lineage.gaps.report(GRID_NS, job="hourly", start=DAY, end=end)
    assert 0.9 < report.counts["complete"] / report.total < 0.95  # every day has an empty lot, too
    for day in range(GRID_DAYS):
        not_done = [state for (d, _), state in NOT_DONE.items() if d == day]
        cell = cells.nth(day)
        assert int(cell.get_attribute("data-done") or "") == (24 - len(not_done)) * 100 // 24
        image = look(cell)
        if len(not_done) <= 2:  # mostly done: mostly green, whatever its empty lot
            assert share(image, GREEN) > 0.6, f"day {day + 1} does not read done"
        if "failed" in not_done:
            assert cell.get_attribute("data-mark") == "failed"
            assert share(image, RED) > 0.05, "the failed lot is flagged in the corner"
        if not not_done:
            assert cell.get_attribute("data-mark") is None
            assert share(image, RED) == 0
    assert share(look(cells.nth(9)), HATCH, 30) > 0.1  # half a day missing: hatched
    expect(page.locator("#legend")).to_contain_text("fills green by its share of complete and empty lots")
    expect(page.locator("#legend [data-key]")).to_have_count(9)  # every state, stale and empty among them
    expect(page.locator('#legend [data-key="stale"]')).to_contain_text("made by an older version")


def test_missing_and_empty_lots_differ_at_cell_size(tab: Tab, ui_server: UiServer) -> None:
    page = tab.page
    page.goto(f"/jobs/{GRID_NS}/hourly/lots?from=2023-01-05&to=2023-01-06")
    missing, empty = (page.locator(f"#grid a.c[data-state={state}]").first for state in ("missing", "empty"))
    hatched, hollow = look(missing), look(empty)
    assert share(hatched, HATCH, 30) > 0.2 and share(hatched, WHITE, 10) > 0.2  # stripes
    assert share(hollow, GREEN) > 0.25 and share(hollow, HATCH, 30) == 0  # a green outline
    assert hollow[len(hollow) // 2][len(hollow) // 2] == WHITE  # with nothing inside


def test_a_day_of_five_minute_lots_is_24_rows_of_12_on_a_time_axis(tab: Tab) -> None:
    page = tab.page
    page.goto(f"/jobs/{GRID_NS}/fine/lots?from={DAY}&to={NEXT_DAY}")
    rows = page.locator("#grid tr:not(.axis)")
    expect(rows).to_have_count(24)
    for n in (0, 23):
        expect(rows.nth(n).locator("a.c")).to_have_count(12)
        expect(rows.nth(n).locator("th")).to_have_text(f"2023-01-01 {n:02d}:00")
    axis = page.locator("#grid tr.axis .ax")
    assert [t for t in axis.all_inner_texts() if t.strip()] == [":00", ":15", ":30", ":45"]
    assert rows.nth(23).locator("a.c").nth(11).get_attribute("data-lot") == "20230101PT5M287"
    box = page.locator("#grid").bounding_box()
    assert box is not None and box["y"] + box["height"] <= 900  # the whole day on one screen


def test_arrow_keys_move_through_the_grid_and_tab_leaves_it(tab: Tab) -> None:
    page = tab.page
    page.goto(f"/jobs/{GRID_NS}/fine/lots?from={DAY}&to={NEXT_DAY}")
    page.get_by_role("link", name="whole history").focus()
    page.keyboard.press("Tab")

    def focused() -> str:
        return str(page.evaluate("document.activeElement.dataset.lot || document.activeElement.tagName"))

    assert focused() == "20230101PT5M000"
    for key, lot in [("ArrowRight", 1), ("ArrowDown", 13), ("End", 23), ("ArrowLeft", 22), ("Home", 12)]:
        page.keyboard.press(key)
        assert focused() == f"20230101PT5M{lot:03d}", key
    page.keyboard.press("ArrowUp")
    assert focused() == "20230101PT5M000"
    page.keyboard.press("Enter")  # opens the lot's panel, as a click does
    expect(page.locator("#lot-panel h2")).to_contain_text("20230101PT5M000")
    page.locator("#grid a.c[data-lot='20230101PT5M005']").focus()
    page.keyboard.press("Tab")  # one tab stop: the next Tab leaves the grid's 288 cells
    assert page.evaluate("document.activeElement.closest('#grid') === null")


def test_no_cell_is_drawn_before_the_first_lot_or_after_now(tab: Tab) -> None:
    page = tab.page
    page.goto(f"/jobs/{NS}/clean/lots?from=2022-12-31&to={NEXT_DAY}")  # a day before raw's first lot
    cells = page.locator("#grid a.c[data-lot]")
    states = dict(
        zip(
            cells.evaluate_all("cs => cs.map(c => c.dataset.lot)"),
            cells.evaluate_all("cs => cs.map(c => c.dataset.state)"),
            strict=True,
        )
    )
    assert states == EXPECTED_CLEAN  # not 24 more lots 'blocked' on 2022-12-31
    expect(page.locator(".note")).to_contain_text("The first lot starts at 2023-01-01 00:00:00")

    page.goto(f"/jobs/{GRID_NS}/hourly/lots?from=2023-01-09&to=2999-01-01&res=day")
    expect(page.locator(".note").last).to_contain_text("Nothing after now")
    days = (NOW.date() - datetime.date(2023, 1, 9)).days + 1  # the 9th, the 10th, and today's 5 minutes
    assert page.locator("#grid a.c").count() == days == 3


def test_the_default_range_starts_where_the_inputs_lots_start(tab: Tab) -> None:
    """``late`` made its first lots on day 6; its lots are due from day 1, where its input's begin."""
    page = tab.page
    page.goto(f"/jobs/{GRID_NS}/late/lots")
    expect(page.locator("input[name=from]")).to_have_value("2023-01-01 00:00:00")
    assert page.locator("#grid a.c").first.get_attribute("data-state") == "missing"


def test_too_many_cells_shows_the_coarser_grid_instead_of_an_error(tab: Tab, ui_server: UiServer) -> None:
    """One-minute lots from the world's first day up to now: 14,405 lots, too many to draw one by one."""
    if ui_server.url not in _MINUTES_SEEDED:
        world = LotWorld(ui_server.lineage, MINUTES_NS)
        world.job("minutely", output="minutes")
        world.produce("minutely", "20230101PT1M0000")
        _MINUTES_SEEDED.add(ui_server.url)
    page = tab.page
    answer = page.goto(f"/jobs/{MINUTES_NS}/minutely/lots?from=2023-01-01&to=2023-03-01&res=lot")
    assert answer is not None and answer.status == 200
    expect(page.locator(".note").last).to_contain_text("14405 cells per lot is more than the grid's 10000")
    expect(page.locator("#totals")).to_contain_text("one cell per hour")


MONTHS_NS = "months"
_MONTHS_SEEDED: set[str] = set()


def test_a_year_of_monthly_lots_is_one_row_of_12_cells_marked_by_state(tab: Tab, ui_server: UiServer) -> None:
    if ui_server.url not in _MONTHS_SEEDED:
        world = LotWorld(ui_server.lineage, MONTHS_NS)
        world.job("monthly", output="months")
        world.produce("monthly", *[f"2022{m:02d}01P1M000" for m in range(1, 7)])
        failed = world.claim("monthly", "20220701P1M000")
        assert failed is not None
        world.lots.fail(failed, error="ValueError: bad month")
        _MONTHS_SEEDED.add(ui_server.url)
    page = tab.page
    page.goto(f"/jobs/{MONTHS_NS}/monthly/lots?from=2022-01-01&to=2023-01-01")
    cells = page.locator("#grid a.c")
    expect(cells).to_have_count(12)
    expect(page.locator("#grid tr:not(.axis)")).to_have_count(1)
    expect(page.locator("#grid tr:not(.axis) th")).to_have_text("2022")
    expect(page.locator("#grid tr.axis .ax").nth(1)).to_have_text("Feb")
    states = [cells.nth(m).get_attribute("data-state") for m in range(12)]
    assert states == ["complete"] * 6 + ["failed"] + ["missing"] * 5
    assert (cells.nth(1).get_attribute("data-from"), cells.nth(1).get_attribute("data-to")) == (
        "2022-02-01T00:00:00+00:00",
        "2022-03-01T00:00:00+00:00",
    )
    assert cells.nth(6).get_attribute("data-lot") == "20220701P1M000"
    assert share(look(cells.nth(6)), RED) > 0.05 and share(look(cells.nth(0)), GREEN) > 0.6
    assert share(look(cells.nth(8)), HATCH, 30) > 0.1  # missing: hatched


def test_a_zoned_day_s_lot_page_gives_its_local_bounds_and_utc_s(tab: Tab, ui_server: UiServer) -> None:
    """The spring-forward New York day is 23 hours: 00:00 to 00:00 local, 05:00 to 04:00 UTC."""
    lot = "20260308P1D.America.New_York.000"
    if ui_server.url not in _ZONED_SEEDED:
        world = LotWorld(ui_server.lineage, ZONED_NS)
        world.job("daily", output="ny_days")
        world.produce("daily", lot)
        _ZONED_SEEDED.add(ui_server.url)
    page = tab.page
    page.goto(f"/datasets/{ZONED_NS}/ny_days/lots/{lot}")
    dash = "\N{EN DASH}"
    expect(page.locator("#window")).to_have_text(
        f"2026-03-08 00:00:00 {dash} 2026-03-09 00:00:00 America/New_York \N{MIDDLE DOT} "
        f"2026-03-08 05:00:00 {dash} 2026-03-09 04:00:00 UTC"
    )


ZONED_NS = "zoned"
_ZONED_SEEDED: set[str] = set()
