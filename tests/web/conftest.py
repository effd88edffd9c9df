"""The web UI driven in headless Chromium (Debian's ``chromium``, through Playwright) against a
real server over SQLite, over a seeded world of lots in every state. Once, on SQLite: the pages
show what the services read, and those reads are the contract suite's on both databases
(``tests/contract/test_ui_reads.py``, the API server per database in ``tests/api/``, lot event
waits in ``tests/api/test_lot_event_waits.py``); a second browser pass over PostgreSQL doubled
the directory's time and proved nothing more about the pages.

Without a Chromium these tests skip with the reason; ``LOTLINE_REQUIRE_BROWSER=1`` (set by CI)
makes a missing browser a failure. ``scripts/test`` installs Debian's package where it can."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from api.conftest import _serve
from lotline.domain.clock import ManualClock
from lotline.services import Lineage, open_lineage
from lotline.storage.objects import Storage
from support.lots import LotWorld
from web.world import NOW, seed, seed_grid

#: The seeded world's "now" (its pages count lots up to now): just after its last lot is due.
CLOCK = ManualClock(NOW)


def _chromium() -> str | None:
    return os.environ.get("LOTLINE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


# Per package: Playwright's sync API runs an event loop in this thread while the browser lives, so
# a later test's ``asyncio.run`` (tests/contract) would fail beside it (pytest-xdist interleaves).
@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    executable = _chromium()
    if executable is None:
        reason = "no Chromium: install Debian's `chromium` package (scripts/test does when it runs as root)"
        if os.environ.get("LOTLINE_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + "; LOTLINE_REQUIRE_BROWSER=1 requires it")
        pytest.skip(reason)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable)
        yield launched
        launched.close()


@dataclass
class UiServer:
    url: str
    lineage: Lineage
    world: LotWorld


@pytest.fixture(scope="session")
def ui_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiServer]:
    """A server over a SQLite database seeded through the services (``web/world.py``)."""
    folder: Path = tmp_path_factory.mktemp("ui")
    db_url = f"sqlite:///{folder / 'lotline.db'}"
    lineage = open_lineage(db_url, Storage(str(folder / "warehouse")), clock=CLOCK)
    seed_grid(lineage)  # first: the start page opens on the namespace written to last, ``ui``
    world = seed(lineage)
    server, thread, url = _serve(db_url, clock=CLOCK)
    yield UiServer(url, lineage, world)
    server.should_exit = True
    thread.join(timeout=30)
    lineage.close()


def tap(page: Page, node: str) -> None:
    """Tap the graph's node of id ``node``, as a click does. The call returns nothing: Playwright
    serialises what an evaluated expression returns, and ``emit`` returns the graph's collection
    (with the whole graph behind it), which took 11 s in Chromium."""
    page.evaluate("node => { lotlineGraph.getElementById(node).emit('tap'); }", node)


@dataclass
class Tab:
    """A browser page that remembers console errors and failed requests: a test ends with none."""

    page: Page
    errors: list[str]
    urls: list[str]


@pytest.fixture
def tab(browser: Browser, ui_server: UiServer) -> Iterator[Tab]:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=ui_server.url)
    page = context.new_page()
    page.set_default_timeout(15_000)
    found = Tab(page, [], [])

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            found.errors.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda error: found.errors.append(f"page error: {error}"))
    page.on("request", lambda request: found.urls.append(request.url))
    yield found
    context.close()
    assert found.errors == [], "the browser console reported errors"
