"""The grid's range backfill (issue 28, point 4): a dry run first, shown as what it would do, with
the token; nothing changes until the operator confirms."""

from __future__ import annotations

from urllib.parse import unquote

from playwright.sync_api import expect

from api.conftest import TOKEN
from support.lots import LotWorld
from web.conftest import Tab, UiServer
from web.world import DAY, NEXT_DAY, NS

#: The servers (one per database) whose ``bfill`` namespace is seeded.
_SEEDED: set[str] = set()


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

    page.locator("#backfill select[name=only]").select_option("")  # every lot: the complete ones reopen
    page.locator("[data-backfill=preview]").click()
    everything = ui_server.lineage.gaps.backfill(NS, "land", start=DAY, end=NEXT_DAY, dry_run=True)
    reopened = sum(r.count for r in everything.reopened)
    expect(plan).to_have_attribute("data-reopened", str(reopened))
    expect(plan).to_have_attribute("data-cascaded", str(everything.cascaded))
    assert reopened == 21 and ui_server.world.table() == before  # 20 complete and 1 empty


def test_a_dragged_range_is_backfilled_and_its_progress_follows_the_lots(
    tab: Tab, ui_server: UiServer
) -> None:
    """Hours 0-5 of a source job, 2 and 4 missing: a drag over hours 1-4 backfills those two, and
    the progress view counts them made as workers make them, without a reload."""
    world = LotWorld(ui_server.lineage, "bfill")
    if ui_server.url not in _SEEDED:
        world.job("src", output="s")
        world.produce("src", *(f"20230101PT1H{n:03d}" for n in (0, 1, 3, 5)))
        _SEEDED.add(ui_server.url)
        ui_server.lineage.catalog.upsert_namespace(NS, owner_name="tests")  # the start page stays on ``ui``
    page = tab.page
    page.goto("/jobs/bfill/src/lots?from=2023-01-01&to=2023-01-01T06:00:00Z")
    page.locator("#token").fill(TOKEN)
    page.locator("#token-form button").click()
    expect(page.locator("#token-state")).to_have_text("token set")
    cells = page.locator("#grid a.c[data-lot]")
    expect(cells).to_have_count(6)
    page.evaluate("window.notReloaded = true")
    first, last = (cells.nth(n).bounding_box() for n in (1, 4))
    assert first is not None and last is not None
    page.mouse.move(first["x"] + 3, first["y"] + 3)
    page.mouse.down()
    page.mouse.move(last["x"] + 3, last["y"] + 3, steps=4)
    page.mouse.up()
    expect(page.locator("#grid a.c.in-range")).to_have_count(4)
    expect(page.locator("#backfill")).to_have_attribute("open", "")
    form = page.locator("#backfill-form")
    expect(form.locator("input[name=backfill-from]")).to_have_value("2023-01-01 01:00:00")
    expect(form.locator("input[name=backfill-to]")).to_have_value("2023-01-01 05:00:00")
    plan = page.locator("#backfill-plan")
    expect(plan).to_have_attribute("data-queued", "2")  # previewed at once: hours 2 and 4
    expect(page.locator("#lot-panel")).to_be_empty()  # a drag is not a click on a lot

    page.locator("[data-backfill=run]").click()
    state = page.locator("#backfill-state")
    expect(state).to_have_attribute("data-total", "2")
    expect(state).to_have_attribute("data-done", "0")
    expect(page.locator("#backfill-runs tbody tr")).to_have_count(2)
    world.produce("src", "20230101PT1H002")  # a worker makes one: a READY lot event
    expect(state).to_have_attribute("data-done", "1", timeout=30_000)
    expect(page.locator("#backfill-runs tr[data-first='20230101PT1H002']")).to_have_attribute(
        "data-done", "1"
    )
    assert page.evaluate("window.notReloaded === true")

    page.locator("#backfill-progress-link").click()  # the same view as a page of its own
    expect(page.locator("h1")).to_contain_text("Backfill of src")
    expect(page.locator("#backfill-state")).to_have_attribute("data-done", "1")
    assert "&lots=20230101PT1H002~20230101PT1H002&lots=20230101PT1H004~20230101PT1H004" in unquote(page.url)
