"""A real uvicorn server per database kind, for the whole session, driven by real HTTP clients.

The server runs ``create_app`` in a thread of the test process (``uvicorn.Server`` on a socket
bound to a free loopback port); it opens its own connections like any deployment would. Every
server requires the bearer token, so every client test also proves that auth works.
Tests share a server, so each works in namespaces of its own (``fresh_ns``).
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import uvicorn

from lotline.api.app import create_app
from lotline.api.protocol import LotlineHttpProtocol
from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.services.config import Settings
from lotline.store.engine import Store
from support.polling import wait_until

TOKEN = "s3cret-test-token"
#: The test servers' read timeout: short, so that the tests of stalled requests are quick.
READ_TIMEOUT_S = 1.0


class QuickTimeoutProtocol(LotlineHttpProtocol):
    read_timeout = READ_TIMEOUT_S


AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass(frozen=True)
class ApiServer:
    url: str
    backend: str
    db_url: str

    def api(self, path: str) -> str:
        return f"{self.url}/api/v1{path}"


def _serve(
    db_url: str,
    *,
    token: str | None = TOKEN,
    read_timeout: float = READ_TIMEOUT_S,
    clock: Clock = SYSTEM_CLOCK,
    **settings: Any,
) -> tuple[uvicorn.Server, threading.Thread, str]:
    """A server over ``db_url`` with the bearer token, its protocol's ``read_timeout``, the
    ``clock`` its pages count up to, and any other ``Settings`` given."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(Settings(db_url=db_url, warehouse="./warehouse", api_token=token, **settings), clock)
    protocol = (
        QuickTimeoutProtocol
        if read_timeout == READ_TIMEOUT_S
        else type("TimeoutProtocol", (LotlineHttpProtocol,), {"read_timeout": read_timeout})
    )
    config = uvicorn.Config(app, http=protocol, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()

    def started() -> bool:
        assert thread.is_alive(), "the API server's thread ended before it started"
        return bool(server.started)

    wait_until(started, timeout=30, every=0.05, what="the API server to start")
    return server, thread, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def api_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApiServer]:
    if request.param == "sqlite":
        path: Path = tmp_path_factory.mktemp("api") / "lotline.db"
        db_url = f"sqlite:///{path}"
    else:
        db_url = request.getfixturevalue("pg_databases").create("api")
        store = Store(db_url)
        store.upgrade()
        store.dispose()
    server, thread, url = _serve(db_url)
    yield ApiServer(url, request.param, db_url)
    server.should_exit = True
    thread.join(timeout=30)


@pytest.fixture
def fresh_ns() -> str:
    """A namespace name no other test uses, with the characters that break naive routing."""
    return f"postgres://db-{uuid.uuid4().hex[:8]}:5432"


@pytest.fixture
def http(api_server: ApiServer) -> Iterator[requests.Session]:
    """A plain HTTP session that sends the token, for what the clients do not expose."""
    with requests.Session() as session:
        session.headers.update(AUTH)
        yield session
