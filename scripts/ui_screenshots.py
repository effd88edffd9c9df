"""Screenshots of each page of the web UI for docs/ui.md, from a server showing the demo's data:

    lotline demo && (cd lotline-demo && lotline serve &) && python scripts/ui_screenshots.py

Needs Playwright (a dev dependency) and Debian's chromium (``/usr/bin/chromium``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

PAGES = (
    ("home", "/?ns=weblogs"),
    ("lineage", "/lineage?node=job:weblogs:hourly_counts&depth=2"),
    ("job", "/jobs/weblogs/parse?state=FAILED&state=COMPLETED"),
    ("dataset", "/datasets/weblogs/hits"),
    ("grid", "/jobs/weblogs/parse/lots"),
    ("lot-lineage", "/datasets/weblogs/hourly_hits/lots/20261123PT1H010/lineage?depth=2"),
    ("events", "/events"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:5000")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent.parent / "docs" / "ui")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        for name, path in PAGES:
            page.goto(args.url + path)
            if name in ("lineage", "lot-lineage"):
                page.wait_for_selector("#graph[data-ready]")
            if name == "grid":
                cell = page.locator("#grid a.c[data-state=partial], #grid a.c[data-lot]").first
                cell.click()
                page.wait_for_selector("#lot-panel #lot")
            if name == "lineage":
                page.wait_for_timeout(300)
            page.screenshot(path=args.out / f"{name}.png")
            print(f"{name}: {args.out / f'{name}.png'}")
        browser.close()
    for error in errors:
        print("console error:", error, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
