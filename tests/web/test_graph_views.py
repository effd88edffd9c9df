"""The graphs' views read whole (issue 39, point 3): a collapsed node's "(+N hidden)" inside the
node, a one-side view laid out again and fitted, and a panel's plain-text 5xx (a real proxy in
front of lotline answers it) shown with its status."""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from playwright.sync_api import Locator, Page, expect

from support.lots import LotWorld
from web.conftest import Tab, UiServer, tap
from web.test_interop import _shot
from web.world import NS, hour

VIEWS_NS = "views"
TOP, MAKE = f"dataset:{VIEWS_NS}:top", f"job:{VIEWS_NS}:make"
FAN = 20
#: The servers (one per database) whose ``views`` namespace is seeded.
_SEEDED: set[str] = set()


def _seed(ui_server: UiServer) -> None:
    """top <- make <- (a <- load_a, b <- load_b), and a and b each read by 20 other jobs: a and b lie
    far apart in the whole graph, each amid its readers."""
    if ui_server.url in _SEEDED:
        return
    world = LotWorld(ui_server.lineage, VIEWS_NS)
    world.job("load_a", output="a")
    world.job("load_b", output="b")
    world.job("make", output="top", inputs=["a", "b"])
    for n in range(FAN):
        world.job(f"read_a{n:02d}", output=f"from_a{n:02d}", inputs=["a"])
        world.job(f"read_b{n:02d}", output=f"from_b{n:02d}", inputs=["b"])
    _SEEDED.add(ui_server.url)


def _open(tab: Tab, ui_server: UiServer) -> tuple[Page, Locator]:
    """The lineage of top, drawn: every node of the views namespace."""
    _seed(ui_server)
    tab.page.goto(f"/lineage?node={TOP}&depth=3")
    graph = tab.page.locator("#graph")
    expect(graph).to_have_attribute("data-ready", str(6 + 4 * FAN))
    return tab.page, graph


#: Each shown node's box on screen, and the graph box's size (the view's extent, in pixels).
_ON_SCREEN = """() => {
  const cy = lotlineGraph;
  return { width: cy.width(), height: cy.height(), zoom: cy.zoom(),
    nodes: cy.nodes(':visible').map(n => [n.id(), n.renderedBoundingBox({includeLabels: false})]) };
}"""


def test_a_one_side_view_is_laid_out_again_and_fitted(tab: Tab, ui_server: UiServer) -> None:
    page, graph = _open(tab, ui_server)
    page.locator("#graph-direction").select_option("up")
    expect(graph).to_have_attribute("data-visible", "6")  # top, make, a, b, load_a, load_b: no reader
    seen = page.evaluate(_ON_SCREEN)
    assert seen["zoom"] * 14 >= 9, "the labels stay readable"
    off = [
        node
        for node, box in seen["nodes"]
        if box["x1"] < 0 or box["y1"] < 0 or box["x2"] > seen["width"] or box["y2"] > seen["height"]
    ]
    assert off == [], f"every node of the upstream view is on screen: {off} are not"
    _shot(tab, ui_server, "graph-upstream")
    page.locator("#graph-direction").select_option("both")
    expect(graph).to_have_attribute("data-visible", str(6 + 4 * FAN))


#: A node's label box and its body's, in the graph's coordinates.
_LABEL_AND_BODY = """(id) => {
  const n = lotlineGraph.getElementById(id);
  return [n.data('shown'), n.boundingBox({includeNodes: false, includeEdges: false, includeLabels: true}),
          n.boundingBox({includeLabels: false, includeOverlays: false})];
}"""


def test_a_collapsed_nodes_label_is_whole_inside_it(tab: Tab, ui_server: UiServer) -> None:
    """make, a job (white text on its colour), collapsed as seen from top hides the 84 others."""
    page, graph = _open(tab, ui_server)
    tap(page, MAKE)
    page.locator("#graph-collapse").click()
    expect(graph).to_have_attribute("data-visible", "2")
    label, text, body = page.evaluate(_LABEL_AND_BODY, MAKE)
    assert label == f"make\n(+{4 + 4 * FAN} hidden)"
    inside = body["x1"] <= text["x1"] and text["x2"] <= body["x2"] and body["y1"] <= text["y1"]
    assert inside and text["y2"] <= body["y2"], f"the label {text} is whole inside its node {body}"
    assert text["h"] >= 2 * 14, "both lines of the label are drawn"
    assert page.evaluate("lotlineGraph.zoom()") * 14 >= 9, "and readable"
    _shot(tab, ui_server, "graph-collapsed")


class _Proxy(BaseHTTPRequestHandler):
    """A reverse proxy in front of lotline, as a deployment has: it passes every request on,
    except those whose path starts with one of ``failing``, which it answers itself with a
    plain-text 502, as a proxy does when lotline is slow or gone."""

    upstream = ""
    failing: ClassVar[set[str]] = set()

    def _pass(self) -> None:
        if any(self.path.startswith(prefix) for prefix in self.failing):
            self._answer(502, "text/plain", b"upstream timed out")
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        request = urllib.request.Request(self.upstream + self.path, body, headers, method=self.command)
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                self._answer(answer.status, answer.headers.get("Content-Type", ""), answer.read())
        except urllib.error.HTTPError as refused:
            self._answer(refused.code, refused.headers.get("Content-Type", ""), refused.read())

    def _answer(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _pass

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def proxy(ui_server: UiServer) -> Iterator[tuple[str, set[str]]]:
    failing: ClassVar[set[str]] = set()
    handler = type("Proxy", (_Proxy,), {"upstream": ui_server.url, "failing": failing})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", failing
    server.shutdown()
    thread.join(timeout=30)
    server.server_close()


def test_a_plain_text_5xx_in_a_panel_is_said_with_its_status(tab: Tab, proxy: tuple[str, set[str]]) -> None:
    url, failing = proxy
    page = tab.page
    said = "the server failed (502): upstream timed out"
    lot = hour(5)
    failing.add(f"/datasets/{NS}/raw/lots/{lot}")
    page.goto(f"{url}/jobs/{NS}/land/lots?from=2023-01-01&to=2023-01-02")
    page.locator(f"#grid a.c[data-lot='{lot}']").click()
    expect(page.locator("#lot-panel [role=alert]")).to_have_text(said)

    failing.add("/lineage/node")
    page.goto(f"{url}/lineage?node=job:{NS}:clean&depth=1")
    expect(page.locator("#graph")).to_have_attribute("data-ready", re.compile(r"\d"))
    tap(page, f"job:{NS}:clean")
    expect(page.locator("#node-details [role=alert]")).to_have_text(said)

    failing.add("/lineage/graph.json")
    page.goto(f"{url}/lineage?node=job:{NS}:clean&depth=1")
    expect(page.locator("#graph [role=alert]")).to_have_text(said)
