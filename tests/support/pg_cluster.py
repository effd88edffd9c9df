"""A throwaway PostgreSQL server of the test's own, so that a test may restart it.

The shared test server serves other test runs at the same time; restarting it would break them.
This one lives in a temporary directory on a free port: ``initdb`` (trust auth), ``pg_ctl start``,
``restart -m fast`` when the test wants an outage, ``stop`` and removal at the end. PostgreSQL
refuses to run as root, so as root the binaries run as the ``postgres`` OS user via ``runuser``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TIMEOUT_S = 120


def _binaries() -> Path | None:
    """The newest installed server's bin directory (Debian layout), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def unavailable_reason() -> str | None:
    """Why no throwaway server can be started here, or None if it can."""
    if _binaries() is None:
        return "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb)"
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return "running as root without runuser (PostgreSQL refuses to run as root)"
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres OS user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ThrowawayPostgres:
    def __init__(self, root: Path, bin_dir: Path, port: int) -> None:
        self.root = root
        self.data = root / "data"
        self.bin_dir = bin_dir
        self.port = port
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
        self.restarts = 0

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin_dir / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=TIMEOUT_S)

    def _ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-w", *args)

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        self.resume()

    def resume(self) -> None:
        """Start the server (again, after ``stop``: its data is kept)."""
        options = f"-k {self.root} -p {self.port} -c listen_addresses=127.0.0.1 -c max_connections=60"
        self._ctl("-o", options, "start")

    def restart(self) -> None:
        """Stop (disconnecting every client, ``-m fast``) and start again, with the same options."""
        self._ctl("-m", "fast", "restart")
        self.restarts += 1

    def stop(self) -> None:
        self._ctl("-m", "fast", "stop")


@contextmanager
def throwaway_postgres() -> Iterator[ThrowawayPostgres]:
    """A running server, stopped and deleted afterwards. Check ``unavailable_reason()`` first."""
    bin_dir = _binaries()
    assert bin_dir is not None, unavailable_reason()
    root = Path(tempfile.mkdtemp(prefix="lotline-pg-"))
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        os.chown(root, account.pw_uid, account.pw_gid)
    server = ThrowawayPostgres(root, bin_dir, _free_port())
    try:
        server.start()
        yield server
        server.stop()
    except subprocess.CalledProcessError as error:
        log = root / "server.log"
        detail = log.read_text()[-2000:] if log.exists() else ""
        raise RuntimeError(f"{error.cmd} failed: {error.stderr.decode()[-2000:]}\n{detail}") from error
    finally:
        if (server.data / "postmaster.pid").exists():
            server._ctl("-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)
