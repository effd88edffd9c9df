"""Screenshots of each page of the web UI for docs/ui.md, from a server showing the demo's data:

    lotline demo && (cd lotline-demo && lotline serve &) && python scripts/ui_screenshots.py

Lot ids are found on the pages (the demo's lots are named after the day it runs), never written
here. Needs Playwright (a dev dependency) and Debian's chromium (``/usr/bin/chromium``)."""

from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

NS = "weblogs"
#: (file name, path, viewport width); ``{lot}`` is a lot of ``hourly_counts`` found on its grid.
PAGES = (
    ("home", f"/?ns={NS}", 1400),
    ("matrix", f"/lots?ns={NS}", 1400),
    ("lineage", f"/lineage?node=job:{NS}:hourly_counts&depth=2", 1400),
    ("lineage-upstream", f"/lineage?node=dataset:{NS}:daily_report&depth=3&dir=up", 1400),
    ("columns", f"/datasets/{NS}/hourly_hits/columns", 1400),
    ("job", f"/jobs/{NS}/parse?state=FAILED&state=COMPLETED", 1400),
    ("dataset", f"/datasets/{NS}/hits", 1400),
    ("grid", f"/jobs/{NS}/parse/lots", 1400),
    ("lot-lineage", "{lot}/lineage?depth=2", 1400),
    ("events", "/events", 1400),
    ("home-narrow", f"/?ns={NS}", 390),
)


#: How long a server just started (``lotline serve &``) is waited for.
STARTUP_SECONDS = 60


def wait_until_up(url: str) -> None:
    """Return once ``url`` answers ``/healthz``: the server may have been started a moment ago."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"no lotline server at {url}: start `lotline serve` in the demo's folder"
                ) from None
            time.sleep(0.5)


def a_lot(page: Page, url: str) -> str:
    """The page path of a complete lot of ``hourly_counts``, from its grid."""
    page.goto(f"{url}/jobs/{NS}/hourly_counts/lots?res=lot")
    href = page.locator("#grid a.c[data-lot][data-state=complete]").last.get_attribute("href")
    if href is None:
        raise SystemExit("the demo's hourly_counts has no complete lot: run `lotline demo` first")
    return href


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:5000")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent.parent / "docs" / "ui")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    wait_until_up(args.url)
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        lot = a_lot(page, args.url)
        for name, path, width in PAGES:
            page.set_viewport_size({"width": width, "height": 900})
            answer = page.goto(args.url + path.format(lot=lot))
            if answer is None or answer.status != 200:
                errors.append(f"{name}: {path.format(lot=lot)} answered {answer and answer.status}")
                continue
            if name in ("lineage", "lineage-upstream", "lot-lineage"):
                page.wait_for_selector("#graph[data-ready]")
                page.wait_for_timeout(300)
            if name == "grid":  # a failed lot's panel, or else the first lot's
                cell = page.locator("#grid a.c[data-state=failed], #grid a.c[data-lot]").first
                cell.click()
                page.wait_for_selector("#lot-panel #lot")
            page.screenshot(path=args.out / f"{name}.png", full_page=name in ("home-narrow", "grid"))
            print(f"{name}: {args.out / f'{name}.png'}")
        browser.close()
    for error in errors:
        print("error:", error, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
