"""``lotline serve`` as a user runs it: a separate process on a free port, configured by environment."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from support.processes import lotline


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.parametrize(
    ("options", "access_log"),
    [([], False), (["--access-log"], True), (["--workers", "2", "--host", "127.0.0.2"], False)],
    ids=["default", "access-log", "two-workers"],
)
def test_serve_answers_reads_and_token_protected_writes(
    tmp_path: Path, options: list[str], access_log: bool
) -> None:
    """Also: the address given to ``--host`` is a ``Host`` the server answers (in every worker
    process), an unknown one is refused."""
    host = options[options.index("--host") + 1] if "--host" in options else "127.0.0.1"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")}
    env |= {
        "LOTLINE_DB_URL": f"sqlite:///{tmp_path / 'served.db'}",
        "LOTLINE_API_TOKEN": "t0ken",
        "LOTLINE_READ_TIMEOUT": "1",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "lotline", "serve", "--port", str(port), *options],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://{host}:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stdout.read() if server.stdout else ""
            try:
                if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except (requests.ConnectionError, requests.Timeout):  # not up, or its workers starting
                assert time.monotonic() < deadline, "lotline serve did not come up"
                time.sleep(0.2)
        ns = f"{base}/api/v1/namespaces/served"
        assert requests.get(ns, headers={"Host": f"evil.example:{port}"}, timeout=10).status_code == 421
        assert requests.put(ns, json={"ownerName": "me"}, timeout=10).status_code == 401
        auth = {"Authorization": "Bearer t0ken"}
        written = requests.put(ns, json={"ownerName": "me"}, headers=auth, timeout=10)
        assert written.status_code == 200
        assert requests.get(ns, timeout=10).json()["ownerName"] == "me"
        # lotline's HTTP protocol, in every worker process: JSON for malformed HTTP, and the read
        # timeout from LOTLINE_READ_TIMEOUT (1 s here) for a body that stops arriving.
        for request, status in (
            (b"POST /api/v1/lineage HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n", b" 400 "),
            (
                b"PUT /api/v1/namespaces/x HTTP/1.1\r\nHost: "
                + host.encode()
                + b"\r\nAuthorization: Bearer t0ken\r\n"
                b"Content-Type: application/json\r\nContent-Length: 9\r\n\r\n{",
                b" 408 ",
            ),
        ):
            with socket.create_connection((host, port), timeout=10) as raw:
                raw.sendall(request)
                answer = b""
                while chunk := raw.recv(4096):
                    answer += chunk
            assert status in answer.split(b"\r\n", 1)[0], answer
            assert b'{"code":' in answer and b"application/json" in answer
    finally:
        server.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully (lifespan closes the store), then re-raises the signal.
        assert server.wait(timeout=120) in (0, -signal.SIGTERM)
    log = server.stdout.read() if server.stdout else ""
    assert "Application shutdown complete" in log, log
    # Requests are logged only when asked for (they are counted in /metrics either way).
    assert ('"PUT /api/v1/namespaces/served HTTP/1.1" 200' in log) is access_log, log
    assert (tmp_path / "served.db").exists()


def test_serve_refuses_a_bad_database_in_one_line(tmp_path: Path) -> None:
    done = lotline(
        "serve",
        "--port",
        str(_free_port()),
        cwd=tmp_path,
        db_url="postgresql://postgres@127.0.0.1:5432/lotline_no_such_db",
        process=True,  # a server that started would serve this process's tests forever
    )
    assert done.returncode != 0
    assert "lotline_no_such_db" in done.stdout + done.stderr
