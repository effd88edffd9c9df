"""The pages in a browser: navigation, the graphs, the lot grid against the database, an action
with the token, and bad input as error pages. Every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import re

import pytest
import requests
from playwright.sync_api import expect

from api.conftest import TOKEN
from lotline.domain.coordination import Role
from lotline.domain.graph import NodeType
from lotline.domain.model import DatasetRef
from lotline.domain.runs import RunState
from web.conftest import Tab, UiServer, tap
from web.world import DAY, ERROR, EXPECTED_CLEAN, EXPECTED_LAND, NEXT_DAY, NS, hour, send_event

DAY_RANGE = f"?from={DAY}&to={NEXT_DAY}"


def grid_states(tab: Tab) -> dict[str, str]:
    cells = tab.page.locator("#grid a.c[data-lot]")
    return dict(
        zip(
            cells.evaluate_all("cs => cs.map(c => c.dataset.lot)"),
            cells.evaluate_all("cs => cs.map(c => c.dataset.state)"),
            strict=True,
        )
    )


def test_from_the_start_page_to_a_run_and_its_error(tab: Tab, ui_server: UiServer) -> None:
    ui_server.lineage.catalog.upsert_namespace(NS, owner_name="tests")  # now the one last written to
    page = tab.page
    page.goto("/")  # opens on the namespace last written to
    expect(page.locator("#ns-switcher")).to_have_value(NS)
    jobs = page.locator("#jobs tbody tr")
    expect(jobs).to_have_count(2)
    latest = ui_server.lineage.runs.latest_states([(NS, "clean")])[(NS, "clean")]
    expect(jobs.filter(has_text="clean").locator(".st")).to_have_text(latest.value.lower())
    page.locator("#jobs").get_by_role("link", name="clean", exact=True).click()
    expect(page.locator("h1")).to_contain_text("clean")
    total = ui_server.lineage.runs.list_runs(NS, "clean").total_count
    expect(page.locator("#run-list tbody tr")).to_have_count(min(total, 50))

    page.locator("#runs input[name=state][value=FAILED]").check()  # htmx swaps in the filtered list
    failed = page.locator("#run-list tbody tr")
    expect(failed).to_have_count(2)
    expect(failed.locator(".st")).to_have_text(["failed", "failed"])
    expect(failed.first.locator(".error-cell")).to_contain_text("line 17")

    failed.first.locator("a").first.click()
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}$"))
    expect(page.locator("#run-error")).to_contain_text(ERROR)
    expect(page.locator("#transitions .st")).to_have_text(["new", "running", "failed"])

    page.get_by_role("link", name="cleaned").first.click()
    expect(page.locator("h1")).to_contain_text("cleaned")
    page.locator("#versions input[name=state][value=failed]").check()
    expect(page.locator("#version-list tbody tr .st")).to_have_text(["failed", "failed"])


def test_search_and_the_namespace_switcher(tab: Tab, ui_server: UiServer) -> None:
    ui_server.lineage.catalog.upsert_namespace("other-team", owner_name="tests")
    page = tab.page
    page.goto("/")
    page.get_by_label("search").fill("clea")
    page.get_by_label("search").press("Enter")
    expect(page.locator("#hits tbody tr")).to_have_count(2)  # the job clean and the dataset cleaned
    page.locator("#ns-switcher").select_option("other-team")
    expect(page.locator("h1")).to_have_text("other-team")
    expect(page.locator("#jobs tbody")).to_contain_text("no jobs")


def test_the_lineage_graph_draws_every_node_coloured_by_its_latest_run(tab: Tab, ui_server: UiServer) -> None:
    page = tab.page
    page.goto(f"/lineage?node=job:{NS}:clean&depth=2")
    expect(page.locator("#graph")).to_have_attribute("data-ready", re.compile(r"\d+"))
    nodes = ui_server.lineage.graph.lineage(f"job:{NS}:clean", 2)
    drawn = page.evaluate("lotlineGraph.nodes().map(n => [n.id(), n.data('state')])")
    latest = ui_server.lineage.runs.latest_states([(NS, "land"), (NS, "clean")])
    expected = {
        n.key.id: (latest[(n.key.namespace, n.key.name)].value if n.key.type is NodeType.JOB else "")
        for n in nodes
    }
    assert dict(map(tuple, drawn)) == expected
    assert expected[f"job:{NS}:clean"] == RunState.FAILED.value  # hour 12's run is the newest
    assert len(expected) == 4

    tap(page, f"job:{NS}:land")
    expect(page.locator("#node-details h3")).to_have_text("land")
    faded = page.evaluate("lotlineGraph.elements('.faded').map(e => e.id())")
    assert faded == []  # a chain: every node is on land's path


def test_a_graph_of_600_nodes_renders(tab: Tab, ui_server: UiServer) -> None:
    """One dataset read by 300 jobs that each write their own: 601 nodes at depth 1."""
    catalog = ui_server.lineage.catalog
    catalog.upsert_namespace("wide", owner_name="tests")
    catalog.upsert_dataset("wide", "source")
    source = DatasetRef("wide", "source")
    for n in range(300):
        catalog.upsert_dataset("wide", f"out{n}")
        catalog.upsert_job("wide", f"job{n}", inputs=[source], outputs=[DatasetRef("wide", f"out{n}")])
    tab.page.goto("/lineage?node=dataset:wide:source&depth=1")
    expect(tab.page.locator("#graph")).to_have_attribute("data-ready", "601", timeout=60_000)
    label_px = float(tab.page.locator("#graph").get_attribute("data-label-px") or "0")
    assert label_px >= 9  # opened legible, on the node asked for, not fitted into illegibility
    # laid out in layers (not by dagre, too slow at this size): left to right, one job per row
    layers = tab.page.evaluate(
        """() => ["source", "job7", "out7"].map((n) => lotlineGraph.nodes().filter(
            (e) => e.data("label") === n)[0].position())"""
    )
    assert layers[0]["x"] < layers[1]["x"] < layers[2]["x"] and layers[1]["y"] == layers[2]["y"]
    rows = tab.page.evaluate("new Set(lotlineGraph.nodes().map((n) => n.position().y)).size")
    assert rows == 301  # a row per job and its output, and the source's, centred between them


@pytest.mark.parametrize(("job", "expected"), [("land", EXPECTED_LAND), ("clean", EXPECTED_CLEAN)])
def test_grid_colours_are_the_states_in_the_database(
    tab: Tab, ui_server: UiServer, job: str, expected: dict[str, str]
) -> None:
    page = tab.page
    page.goto(f"/jobs/{NS}/{job}/lots{DAY_RANGE}")
    assert grid_states(tab) == expected
    colours = {
        state: page.locator(f"#grid a.c[data-state={state}]").first.evaluate(
            "c => ['backgroundColor', 'backgroundImage', 'borderTopColor']"
            ".map(k => getComputedStyle(c)[k]).join()"
        )
        for state in set(expected.values())
    }
    assert len(set(colours.values())) == len(colours), colours  # each state its own look
    report = ui_server.lineage.gaps.report(NS, job=job, start=DAY, end=NEXT_DAY)
    shown = {state: int(page.locator(f"#totals b[data-state={state}]").inner_text()) for state in colours}
    assert sum(shown.values()) == report.total == 24

    page.goto(f"/jobs/{NS}/{job}/lots{DAY_RANGE}&res=day")  # aggregated: the most urgent state wins
    [cell] = page.locator("#grid a.c").all()
    assert cell.get_attribute("data-state") == ("failed" if "failed" in expected.values() else "blocked")
    cell.click()  # zooms into the day, per hour
    expect(page.locator("#grid a.c[data-lot]")).to_have_count(24)


def test_a_lot_panel_and_actions_with_the_token(tab: Tab, ui_server: UiServer) -> None:
    page = tab.page
    lots = ui_server.lineage.lots
    lot = hour(5)
    page.goto(f"/jobs/{NS}/land/lots{DAY_RANGE}")
    page.locator(f"#grid a.c[data-lot='{lot}']").click()
    panel = page.locator("#lot-panel")
    expect(panel.locator("h2")).to_contain_text(lot)
    expect(panel.locator("#lot-status tr[data-role=OUTPUT]")).to_contain_text("complete")
    expect(panel.locator("#lot-status tr[data-role=INPUT]")).to_contain_text("read")
    expect(panel.locator("#lot-events")).to_contain_text("ready")

    hold = panel.get_by_role("button", name="hold")
    expect(hold).to_be_disabled()  # no token yet: the actions say they need one
    expect(hold).to_have_attribute("title", re.compile("Set the API token"))
    page.locator("#token").fill("not-the-token")
    page.locator("#token-form button").click()
    expect(page.locator("#token-state")).to_have_text("wrong token: the server refused it")
    expect(hold).to_be_disabled()
    assert _status(ui_server, "raw", lot) == "READY"

    page.locator("#token").fill(TOKEN)
    page.locator("#token-form button").click()
    expect(page.locator("#token-state")).to_have_text("token set")
    expect(hold).to_have_attribute("title", re.compile("No worker claims this lot until it is released"))
    panel.get_by_role("button", name="hold").click()
    expect(page.locator("#toast")).to_contain_text("hold: done")
    expect(page.locator(f"#grid a.c[data-lot='{lot}']")).to_have_attribute("data-state", "held")
    assert _status(ui_server, "raw", lot) == "HOLD"
    expect(panel.locator("#lot-status tr[data-role=OUTPUT]")).to_contain_text("held")

    panel.get_by_role("button", name="release").click()
    expect(page.locator(f"#grid a.c[data-lot='{lot}']")).to_have_attribute("data-state", "complete")
    assert _status(ui_server, "raw", lot) == "READY"
    assert lots is ui_server.lineage.lots
    assert not any(TOKEN in url for url in tab.urls), "the token must never be put in a URL"


def _status(ui_server: UiServer, dataset: str, lot: str) -> str:
    rows = ui_server.lineage.lots.status(NS, dataset=dataset, role=Role.OUTPUT)
    return next(r.status.value for r in rows if r.lot == lot)


def test_lot_lineage_shows_the_input_lot_and_the_run_that_read_it(tab: Tab, ui_server: UiServer) -> None:
    """Cleaned hour 1 <- clean's run <- raw hour 1 <- land's run: the exact versions, nothing else."""
    versions = ui_server.lineage.versions
    made, read = (versions.current_version(NS, d, hour(1)) for d in ("cleaned", "raw"))
    assert made is not None and read is not None
    cleaned, raw = f"cleaned\n{hour(1)} v{made.number}", f"raw\n{hour(1)} v{read.number}"
    page = tab.page
    page.goto(f"/datasets/{NS}/cleaned/lots/{hour(1)}/lineage")
    expect(page.locator("#graph")).to_have_attribute("data-ready", "4")
    kinds = page.evaluate("lotlineGraph.nodes().map(n => n.data('kind') + ' ' + n.data('label'))")
    assert sorted(kinds) == sorted(
        [f"lot {cleaned}", f"lot {raw}", "run clean\ncompleted", "run land\ncompleted"]
    )
    edges = page.evaluate(
        "lotlineGraph.edges().map(e => e.source().data('label') + ' > ' + e.target().data('label'))"
    )
    assert sorted(edges) == sorted(
        [f"land\ncompleted > {raw}", f"{raw} > clean\ncompleted", f"clean\ncompleted > {cleaned}"]
    )
    expect(page.locator("#lot-sources")).to_contain_text(f"raw · {hour(1)}")


def test_openlineage_events_are_listed_and_filtered(tab: Tab, ui_server: UiServer) -> None:
    for number, job in enumerate(("ol-a", "ol-b")):
        send_event(
            ui_server.url,
            TOKEN,
            eventType="START",
            eventTime="2024-05-01T10:00:00Z",
            run={"runId": f"01890000-0000-7000-8000-00000000000{number}"},
            job={"namespace": "ol-ns", "name": job},
        )
    page = tab.page
    page.goto("/events?ns=ol-ns")
    expect(page.locator("#event-list tbody tr")).to_have_count(2)
    page.get_by_label("job name", exact=True).fill("ol-b")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("#event-list tbody tr")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("ol-b")


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        (f"/jobs/{NS}/clean/lots?from=yesterday&to={NEXT_DAY}", 400, "RFC 3339"),
        (f"/jobs/{NS}/clean/lots{DAY_RANGE}&res=week", 400, "resolution"),
        (f"/jobs/{NS}/clean?state=DONE", 400, "state must be among"),
        (f"/jobs/{NS}/clean?offset=-1", 400, "offset"),
        ("/runs/not-a-run", 400, "not a run id"),
        (f"/jobs/{NS}/nope", 404, "nope"),
        (f"/datasets/{NS}/cleaned/lots/{hour(99)}", 404, "not found"),
        ("/lineage?node=job:nowhere:nothing", 404, "nothing"),
        ("/lineage", 400, "node is required"),
        ("/events?before=soon", 400, "before"),
        (f"/jobs/{NS}/land/backfill?from={DAY}", 400, "from and to are required"),
        (f"/jobs/{NS}/land/backfill{DAY_RANGE}&lots=nope", 400, "FIRST~LAST"),
        (
            f"/jobs/{NS}/land/backfill{DAY_RANGE}&lots=20230102PT1H000~20230102PT1H001",
            400,
            "inside the range",
        ),
        (f"/datasets/{NS}/cleaned/columns?version=v1", 400, "not a version id"),
    ],
)
def test_bad_input_is_an_error_page_and_changes_nothing(
    ui_server: UiServer, path: str, status: int, message: str
) -> None:
    before = ui_server.world.table()
    answer = requests.get(ui_server.url + path, timeout=10)
    assert answer.status_code == status
    assert "text/html" in answer.headers["content-type"]
    assert message in answer.text
    assert ui_server.world.table() == before
