#!/usr/bin/env python3
"""Install the web UI's front-end libraries from npm and copy their browser builds into the package.

The libraries are declared in package.json (versions fixed by package-lock.json) and are never
committed: this script puts them in ``src/lotline/web/static/vendor/``, which the server serves
and the wheel ships, so that a user of a built wheel needs no Node.js. ``scripts/_venv.sh`` and
the wheel build (setup.py) run it; it does nothing when the copies match the lock file.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "src" / "lotline" / "web" / "static" / "vendor"
#: What the pages load, from each package's own distribution folder.
FILES = {
    "htmx.min.js": "htmx.org/dist/htmx.min.js",
    "cytoscape.min.js": "cytoscape/dist/cytoscape.min.js",
    "cytoscape-dagre.min.js": "cytoscape-dagre/dist/cytoscape-dagre.min.js",
}
STAMP = VENDOR / ".lock-sha256"


def main() -> int:
    lock = ROOT / "package-lock.json"
    want = hashlib.sha256(lock.read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == want and all((VENDOR / n).exists() for n in FILES):
        return 0
    npm = shutil.which("npm")
    if npm is None:
        print("the web UI's libraries come from npm, which was not found (install Node.js)", file=sys.stderr)
        return 1
    subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=ROOT, check=True
    )
    VENDOR.mkdir(parents=True, exist_ok=True)
    for name, source in FILES.items():
        shutil.copyfile(ROOT / "node_modules" / source, VENDOR / name)
    STAMP.write_text(want)
    print(f"web UI libraries copied into {VENDOR.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
