"""The ``lotline`` command as a user runs it, configured by its environment: in this process through
Typer's runner (a fresh interpreter costs 2.5 to 3 s), or, with ``process=True``, as a separate process
(the one check per command that the installed entry point itself works)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

#: What the concurrency tests' processes import (the store, its drivers, the services), imported once
#: by the fork server they are forked from.
PRELOADED = [
    "lotline.services",
    "lotline.store.engine",
    "lotline.storage.objects",
    "psycopg",
    "sqlalchemy.dialects.postgresql.psycopg",
    "sqlalchemy.dialects.sqlite.pysqlite",
]


def separate_processes() -> BaseContext:
    """Separate processes for a concurrency test, each opening its own connections.

    They are forked from ``multiprocessing``'s fork server, a clean interpreter (none of the test
    process's threads, connections or Spark) that imported ``PRELOADED`` once; a fresh interpreter
    per process (``spawn``) imported them again, about 1.2 s of CPU a process (200 in the suite).
    The fork server does not follow the test's environment or working directory: pass what a
    process needs as arguments."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOADED)
    return context


def lotline(
    *args: str,
    cwd: Path,
    db_url: str | None = None,
    settings: dict[str, str] | None = None,
    timeout: float = 120,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``lotline ARGS`` with no LOTLINE_* setting but ``db_url`` and ``settings``."""
    env = _environment(db_url, settings)
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


def _environment(db_url: str | None, settings: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with no LOTLINE_* setting but ``db_url`` and ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")}
    if db_url is not None:
        env["LOTLINE_DB_URL"] = db_url
    env.update(settings or {})
    return env


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


def lotlines_at_once(
    *args: str, count: int, cwd: Path, db_url: str, timeout: float = 600
) -> list[subprocess.CompletedProcess[str]]:
    """``count`` commands ``lotline ARGS`` started together, each a separate process with its own
    connections (forked from the fork server of ``separate_processes``: no interpreter start and no
    import per process), configured as ``lotline`` configures one."""
    env = _environment(db_url)
    context = separate_processes()
    answers = context.Queue()
    started = [
        context.Process(target=_answer_in_process, args=(list(args), str(cwd), env, answers))
        for _ in range(count)
    ]
    for process in started:
        process.start()
    # Before joining: a process exits once its answer is read. A process that died without one
    # (an exception: the command runs with ``catch_exceptions=False``) fails this at the timeout.
    done = [answers.get(timeout=timeout) for _ in started]
    for process in started:
        process.join(timeout)
        assert process.exitcode == 0, f"a lotline process ended with exit code {process.exitcode}"
    return done


def _answer_in_process(args: list[str], cwd: str, env: dict[str, str], answers: Any) -> None:
    """In a forked process: ``env`` is made the command's whole environment by ``_in_process``
    (the fork server's own environment is not the test's)."""
    answers.put(_in_process(args, Path(cwd), env))
