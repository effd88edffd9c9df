"""The server's projector process: wake-ups never block the server, and the projector stops when
the server's end of the signal pipe closes — asked to (``stop``) or because the server died."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from lotline.server.projector import ProjectorProcess
from support.polling import running, wait_until
from support.processes import separate_processes

HANG_S = 60.0  # far beyond any wait here: reaching it means something hangs


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'projector.db'}"


def _returns(action: Callable[[], object]) -> bool:
    """Whether ``action()`` returns at all (run in a thread; a hang leaves the thread alive)."""
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    thread.join(HANG_S)
    return not thread.is_alive()


def test_wake_ups_never_block_even_when_the_projector_reads_none(tmp_path: Path) -> None:
    projector = ProjectorProcess(_url(tmp_path), poll_seconds=HANG_S)
    projector.start()
    assert projector.pid is not None
    os.kill(projector.pid, signal.SIGSTOP)  # reads nothing from now on
    try:
        # Far more than a pipe holds (64 KiB): a blocking write would hang the server here.
        assert _returns(lambda: [projector.wake() for _ in range(200_000)])
    finally:
        os.kill(projector.pid, signal.SIGCONT)
    assert projector.stop(timeout=HANG_S) == 0  # it stopped as asked, not terminated


def test_a_killed_projector_neither_hangs_nor_fails_the_server(tmp_path: Path) -> None:
    projector = ProjectorProcess(_url(tmp_path), poll_seconds=HANG_S)
    projector.start()
    assert projector.pid is not None
    pid = projector.pid
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not running(pid), timeout=HANG_S, what="the killed projector to die", every=0.01)
    assert _returns(lambda: [projector.wake() for _ in range(1_000)])
    assert projector.stop(timeout=HANG_S) == -signal.SIGKILL


def _server_that_dies(url: str, pid_file: str) -> None:
    projector = ProjectorProcess(url, poll_seconds=HANG_S)
    projector.start()
    Path(pid_file).write_text(str(projector.pid))
    projector.wake()
    os._exit(0)  # no stop(): as if the server were killed


def test_a_projector_whose_server_died_stops_by_itself(tmp_path: Path) -> None:
    pid_file = tmp_path / "projector.pid"
    server = separate_processes().Process(target=_server_that_dies, args=(_url(tmp_path), str(pid_file)))
    server.start()
    server.join(HANG_S)
    pid = int(pid_file.read_text())
    wait_until(lambda: not running(pid), timeout=HANG_S, what="the orphaned projector to stop", every=0.05)


def test_the_projector_runs_only_on_cpu_nothing_else_wants(tmp_path: Path) -> None:
    """Accepting events comes first: the projector runs under SCHED_IDLE (Linux) and niced."""
    projector = ProjectorProcess(_url(tmp_path), poll_seconds=HANG_S)
    projector.start()
    assert projector.pid is not None
    try:
        pid = projector.pid
        wait_until(  # it lowers its own priority as it starts
            lambda: os.sched_getscheduler(pid) == os.SCHED_IDLE,
            timeout=10,
            what="the projector to run under SCHED_IDLE",
            every=0.01,
        )
        assert os.getpriority(os.PRIO_PROCESS, projector.pid) > os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        assert projector.stop() == 0
