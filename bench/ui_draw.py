"""How long does Chromium take to draw the web UI's year grid and a lineage graph of ~500 nodes?

    .venv/bin/python -m bench.ui_draw [--repeat 5] [--chromium /usr/bin/chromium]

Seeds a fresh PostgreSQL database (``bench/_seed.py``: a chain of 2 jobs with a year of PT5M
lots, the last job's with gaps of every kind) and, in the namespace ``draw``, a lineage of 501
nodes (a hub dataset read by 25 chains of 10 jobs, each job writing the next one's input, through
the OpenLineage service); serves it with ``lotline serve`` in its own process and opens the pages
in headless Chromium (Playwright, Debian's ``/usr/bin/chromium``).

The figures are the performance measures the pages set themselves (``static/ui.js``):
``lotline:page``, from the page's response received to the first frame drawn after it was parsed,
and ``lotline:graph``, from the graph's JSON received to its first frame drawn after the layout;
medians of ``--repeat`` loads after one warm-up. Printed beside them, measured in the same run:
the server's time to the first byte and the download, and the baselines, the same pages almost
empty (the grid of one day in one cell, the lineage of one node). Targets (issue 28): the year
grid drawn < 1 s after the response; the lineage of 500 nodes drawn < 1 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
from dataclasses import dataclass
from typing import Any

from playwright.sync_api import Page, sync_playwright

from bench._seed import NS, seed_chain
from bench._server import free_port, fresh_database, serve
from bench.gaps import machine
from lotline.services import open_lineage

TARGET_MS = 1000.0
#: The lineage: a hub dataset read by CHAINS chains of LENGTH jobs (1 + 2 * 25 * 10 = 501 nodes).
LINEAGE_NS, CHAINS, LENGTH = "draw", 25, 10
HUB = f"dataset:{LINEAGE_NS}:hub"


def _ref(name: str) -> dict[str, str]:
    return {"namespace": LINEAGE_NS, "name": name}


def seed_lineage(db_url: str) -> None:
    """The hub and its chains, as OpenLineage events accepted and projected (the real write path)."""
    events = [
        {
            "eventTime": "2026-01-01T00:00:00Z",
            "job": {"namespace": LINEAGE_NS, "name": f"c{c}/job{k}"},
            "inputs": [_ref("hub" if k == 0 else f"c{c}/d{k}")],
            "outputs": [_ref(f"c{c}/d{k + 1}")],
        }
        for c in range(CHAINS)
        for k in range(LENGTH)
    ]
    with open_lineage(db_url) as lineage:
        lineage.openlineage.accept_batch(events)
        lineage.projection.drain()


@dataclass
class Drawn:
    """Medians over the loads of one page, in ms; ``size``: what it drew (cells or nodes); ``cpu``:
    the CPU time of Chromium's processes from the navigation to the drawing (all of the page's
    work, not only the drawing, but a figure the machine's other load barely changes)."""

    server: float
    download: float
    drawn: float
    fastest: float
    cpu: float
    size: str


def _descendants() -> list[int]:
    """This process's descendants: Playwright's driver and the Chromium it launched."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:  # gone meanwhile
                continue
            children.setdefault(parent, []).append(int(entry))
    found, queue = [], [os.getpid()]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def _cpu_ms(pids: list[int]) -> float:
    """User and system CPU time of ``pids`` (Linux ``/proc``), in ms."""
    ticks = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return 1000 * ticks / os.sysconf("SC_CLK_TCK")


def _load(page: Page, url: str, measure: str) -> dict[str, Any]:
    pids = _descendants()
    cpu = _cpu_ms(pids)
    page.goto(url)
    page.wait_for_function(f"performance.getEntriesByName({measure!r}, 'measure').length > 0")
    cpu = _cpu_ms(pids) - cpu
    found: dict[str, Any] = page.evaluate(
        """(measure) => {
        const nav = performance.getEntriesByType("navigation")[0];
        const graph = document.getElementById("graph");
        return {
            server: nav.responseStart - nav.requestStart,
            download: nav.responseEnd - nav.responseStart,
            drawn: performance.getEntriesByName(measure, "measure")[0].duration,
            size: graph ? graph.dataset.ready + " nodes"
                : document.querySelectorAll("#grid .c[data-from]").length + " cells",
        };
    }""",
        measure,
    )
    found["cpu"] = cpu
    if measure == "lotline:graph":  # the graph's own JSON: its server time and download
        timing = page.evaluate(
            """() => performance.getEntriesByType("resource").filter((r) => r.name.includes(".json"))[0]"""
        )
        found["server"] = timing["responseStart"] - timing["requestStart"]
        found["download"] = timing["responseEnd"] - timing["responseStart"]
    return found


def measure(page: Page, url: str, measure_name: str, repeat: int) -> Drawn:
    _load(page, url, measure_name)  # warm-up: the static files cached, the server's caches warm
    loads = [_load(page, url, measure_name) for _ in range(repeat)]

    def median(key: str) -> float:
        return statistics.median(load[key] for load in loads)

    fastest = min(load["drawn"] for load in loads)
    size = loads[0]["size"]
    return Drawn(median("server"), median("download"), median("drawn"), fastest, median("cpu"), size)


def _print(name: str, found: Drawn, baseline: Drawn) -> None:
    met = "met" if found.drawn < TARGET_MS else "MISSED"
    verdict = f"; target < {TARGET_MS:.0f} ms {met}"
    print(
        f"{name:34} drawn {found.drawn:7.1f} ms after the response (fastest {found.fastest:6.1f} ms; "
        f"{found.size}); server {found.server:6.1f} ms, download {found.download:6.1f} ms; Chromium CPU "
        f"{found.cpu:6.0f} ms; baseline ({baseline.size}) drawn {baseline.drawn:6.1f} ms, ratio "
        f"{found.drawn / baseline.drawn:5.1f}x, Chromium CPU {baseline.cpu:6.0f} ms{verdict}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    repeat = args.repeat
    with fresh_database("ui_draw") as db_url:
        chain = seed_chain(db_url, 2, 365)
        seed_lineage(db_url)
        print(f"seeded {chain.rows} lot rows in {chain.seconds:.0f} s and a lineage of 501 nodes", flush=True)
        with serve(db_url, free_port()) as (base, _), sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            grid = f"{base}/jobs/{NS}/j1/lots"
            one_cell = measure(page, f"{grid}?from=2023-06-01&to=2023-06-02&res=day", "lotline:page", repeat)
            by_day = measure(page, grid, "lotline:page", repeat)
            by_hour = measure(page, f"{grid}?from=2023-01-01&to=2024-01-01&res=hour", "lotline:page", repeat)
            lineage = f"{base}/lineage?node={HUB}"
            one_node = measure(page, lineage + "&depth=0", "lotline:graph", repeat)
            graph = measure(page, lineage + f"&depth={LENGTH}", "lotline:graph", repeat)
            browser.close()
        _print("year grid, a cell per day (auto)", by_day, one_cell)
        _print("year grid, a cell per hour", by_hour, one_cell)
        _print("lineage graph, depth 10", graph, one_node)
        print(f"Chromium headless, 1400x900; {machine()}", flush=True)


if __name__ == "__main__":
    main()
