"""The ``lotline`` command as a user runs it, configured by its environment: in this process through
Typer's runner (a fresh interpreter costs 2.5 to 3 s), or, with ``process=True``, as a separate process
(the one check per command that the installed entry point itself works)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner


def lotline(
    *args: str,
    cwd: Path,
    db_url: str | None = None,
    settings: dict[str, str] | None = None,
    timeout: float = 120,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``lotline ARGS`` with no LOTLINE_* setting but ``db_url`` and ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")}
    if db_url is not None:
        env["LOTLINE_DB_URL"] = db_url
    env.update(settings or {})
    if not process:
        return _in_process(list(args), cwd, env)
    return subprocess.run(
        [sys.executable, "-m", "lotline", *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _in_process(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The command in this process, with ``env`` as its whole environment and ``cwd`` as its working
    directory; the signal handlers a command installs (``events``, ``worker``) are put back."""
    from lotline.cli.main import app

    unset: dict[str, str | None] = {k: None for k in os.environ if k not in env}
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        with contextlib.chdir(cwd):
            result = CliRunner().invoke(app, args, env={**unset, **env}, catch_exceptions=False)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return subprocess.CompletedProcess(["lotline", *args], result.exit_code, result.stdout, result.stderr)
