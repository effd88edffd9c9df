"""The ``lotline`` command as a user runs it: a separate process, configured by its environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def lotline(
    *args: str,
    cwd: Path,
    db_url: str | None = None,
    settings: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run ``lotline ARGS`` with no LOTLINE_* setting but ``db_url`` and ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")}
    if db_url is not None:
        env["LOTLINE_DB_URL"] = db_url
    env.update(settings or {})
    return subprocess.run(
        [sys.executable, "-m", "lotline", *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
