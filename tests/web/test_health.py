"""Lot health first (issue 28, point 1): the start page puts what needs attention first, each job's
lots in the grid's words and totals beside its latest run; the job and dataset pages count the
same; held jobs are marked; the namespace's lots by jobs matrix reads a blocked chain down a column."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from web.conftest import Tab, UiServer
from web.world import DAY, EXPECTED_CLEAN, EXPECTED_LAND, GRID_NS, NEXT_DAY, NS


def counts_of(page: Page, scope: str) -> dict[str, int]:
    """The health bar's counts in ``scope``, by state."""
    found = page.locator(f"{scope} .health .n")
    states = found.evaluate_all("ns => ns.map(n => n.dataset.state)")
    numbers = found.locator("b").all_inner_texts()
    return dict(zip(states, map(int, numbers), strict=True))


def grid_totals(page: Page) -> dict[str, int]:
    found = page.locator("#totals b[data-state]")
    states = found.evaluate_all("bs => bs.map(b => b.dataset.state)")
    return dict(zip(states, map(int, found.all_inner_texts()), strict=True))


def test_the_start_page_puts_trouble_first_in_the_grids_words(tab: Tab, ui_server: UiServer) -> None:
    page = tab.page
    page.goto(f"/?ns={GRID_NS}")
    rows = page.locator("#jobs tbody tr")
    # hourly has a failed lot; fine only missing ones; late is blocked only where hourly is missing
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.job)")[0] == "hourly"
    for job in ("hourly", "fine", "late"):
        row = f"#jobs tr[data-job={job}]"
        shown = counts_of(page, row)
        expect(page.locator(row).locator(".st")).to_have_count(1)  # the latest run, beside its lots
        page.goto(f"/jobs/{GRID_NS}/{job}/lots")
        assert grid_totals(page) == shown, job  # one vocabulary, one total
        page.goto(f"/?ns={GRID_NS}")
    hourly = counts_of(page, "#jobs tr[data-job=hourly]")
    assert hourly["failed"] == 1 and hourly["empty"] > 0 and hourly["running"] == 1

    page.goto(f"/?ns={NS}")
    order = page.locator("#jobs tbody tr").evaluate_all("rs => rs.map(r => r.dataset.job)")
    assert order == ["clean", "land"]  # both have a failed lot; clean has blocked ones too
    clean = counts_of(page, "#jobs tr[data-job=clean]")
    report = ui_server.lineage.gaps.report(NS, job="clean")  # from the first lot up to now, as the page
    assert sum(clean.values()) == report.total
    waiting = ("failed", "blocked", "held", "running")
    assert {k: v for k, v in clean.items() if k in waiting} == {
        state.value: n for state, n in report.counts.items() if state.value in waiting and n
    }


def test_a_held_job_is_marked_wherever_its_lots_are_shown(tab: Tab, ui_server: UiServer) -> None:
    lots, page = ui_server.lineage.lots, tab.page
    lots.hold_job(GRID_NS, "fine")
    try:
        page.goto(f"/?ns={GRID_NS}")
        expect(page.locator("#jobs tr[data-job=fine] [data-held=true]")).to_be_visible()
        expect(page.locator("#jobs tr[data-job=hourly] [data-held=true]")).to_have_count(0)
        # every lot from its first up to now (ten days of PT5M and one more): held, but the two it has
        assert counts_of(page, "#jobs tr[data-job=fine]") == {"complete": 2, "held": 10 * 288 + 1 - 2}
        page.goto(f"/jobs/{GRID_NS}/fine")
        expect(page.locator("h1 [data-held=true]")).to_be_visible()
        expect(page.locator(".actions")).to_contain_text("Hold stops new claims")
        page.goto(f"/lots?ns={GRID_NS}")
        expect(page.locator("#matrix tr[data-job=fine] [data-held=true]")).to_be_visible()
    finally:
        lots.release_job(GRID_NS, "fine")


def test_the_job_and_dataset_pages_count_lots_as_the_grid_does(tab: Tab) -> None:
    page = tab.page
    page.goto(f"/jobs/{NS}/clean/lots")
    expected = grid_totals(page)
    page.goto(f"/jobs/{NS}/clean")
    assert counts_of(page, "#lot-health") == expected
    page.goto(f"/datasets/{NS}/cleaned")
    assert counts_of(page, "#lot-health") == expected


def test_the_matrix_has_a_row_per_job_in_dependency_order(tab: Tab) -> None:
    page = tab.page
    page.goto(f"/lots?ns={NS}&from={DAY}&to={NEXT_DAY}&res=lot")
    rows = page.locator("#matrix tr[data-job]")
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.job)") == ["land", "clean"]  # producer first
    for job, expected in (("land", EXPECTED_LAND), ("clean", EXPECTED_CLEAN)):
        cells = page.locator(f"#matrix tr[data-job={job}] a.c")
        lots = cells.evaluate_all("cs => cs.map(c => c.dataset.lot)")
        states = cells.evaluate_all("cs => cs.map(c => c.dataset.state)")
        assert dict(zip(lots, states, strict=True)) == expected, job
    # hour 22: land failed, so clean is blocked, one above the other
    column = [page.locator(f"#matrix tr[data-job={j}] a.c").nth(22) for j in ("land", "clean")]
    assert [cell.get_attribute("data-state") for cell in column] == ["failed", "blocked"]
    page.goto(f"/lots?ns={GRID_NS}")
    expect(page.locator("#matrix tr[data-job]")).to_have_count(3)
    widths = {page.locator(f"#matrix tr[data-job={job}] a.c").count() for job in ("fine", "hourly", "late")}
    assert len(widths) == 1  # every row over the same cells
