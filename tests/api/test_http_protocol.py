"""Issue 14, point 7: what reaches the server before a request exists — malformed HTTP, huge headers,
requests that stop arriving — answered as every lotline error (``{"code", "message"}`` JSON), over
raw sockets against the real test server (``api_server``, its read timeout ``READ_TIMEOUT_S``), on
SQLite and PostgreSQL. With uvicorn's own protocol these got plain text, no limit, or no timeout.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlparse

import pytest

from api.conftest import READ_TIMEOUT_S, ApiServer, _serve
from lotline.api.protocol import MAX_HEADER_BYTES
from lotline.domain.errors import InvalidInput
from lotline.services.config import DEFAULT_READ_TIMEOUT_S, Settings, load_settings

#: Long enough for the server's timeout to have fired, short enough to keep the suite quick.
WAIT_S = READ_TIMEOUT_S + 4


def _connect(server: ApiServer) -> socket.socket:
    address = urlparse(server.url)
    sock = socket.create_connection((address.hostname, address.port), timeout=WAIT_S)
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read one whole answer (the server closes the connection after these answers)."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        headers = dict(
            line.decode().lower().split(": ", 1) for line in head.split(b"\r\n")[1:] if b": " in line
        )
        if b"\r\n\r\n" in data and len(body) >= int(headers.get("content-length", "-1")) >= 0:
            break
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    headers = dict(line.decode().lower().split(": ", 1) for line in head.split(b"\r\n")[1:] if b": " in line)
    return status, headers, body


def _json_error(sock: socket.socket, status: int) -> str:
    got, headers, body = _answer(sock)
    assert got == status, body
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    document = json.loads(body)
    assert document["code"] == status
    message: str = document["message"]
    return message


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Length: ten\r\n\r\n",
        b"POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Length: 5\r\nContent-Length: 7\r\n\r\nhello",
        b"GET /api/v1/namespaces HTTP/9.9 extra\r\n\r\n",
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",  # a TLS hello sent to the plain port
    ],
    ids=["non-numeric-length", "two-lengths", "bad-request-line", "tls-hello"],
)
def test_a_request_the_parser_refuses_is_a_json_400(api_server: ApiServer, request_bytes: bytes) -> None:
    with _connect(api_server) as sock:
        sock.sendall(request_bytes)
        assert "Malformed HTTP request" in _json_error(sock, 400)


def test_headers_over_the_limit_are_a_json_431(api_server: ApiServer) -> None:
    with _connect(api_server) as sock:
        filler = b"X-Filler: " + b"a" * 1000 + b"\r\n"
        request = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: localhost\r\n"
        sock.sendall(request + filler * (MAX_HEADER_BYTES // 1000 + 2))
        assert f"{MAX_HEADER_BYTES} bytes" in _json_error(sock, 431)


def test_headers_under_the_limit_are_served(api_server: ApiServer) -> None:
    with _connect(api_server) as sock:
        filler = b"X-Filler: " + b"a" * 1000 + b"\r\n"
        sock.sendall(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: localhost\r\n" + filler * 60 + b"\r\n")
        status, _, _ = _answer(sock)
        assert status == 200


def test_a_body_that_stops_arriving_is_a_408_and_the_connection_closes(api_server: ApiServer) -> None:
    with _connect(api_server) as sock:
        sock.sendall(
            b"POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer s3cret-test-token\r\n"
            b'Content-Length: 1000\r\n\r\n{"eventType": '
        )
        assert "stopped arriving" in _json_error(sock, 408)  # the socket gives up after WAIT_S
        assert _closed(sock)


def test_headers_that_stop_arriving_are_a_408(api_server: ApiServer) -> None:
    with _connect(api_server) as sock:
        sock.sendall(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: localhost\r\nX-Half")
        assert "stopped arriving" in _json_error(sock, 408)


#: The slow request's own server: a silence timeout long enough that no loaded machine stalls the
#: test's sender that long between two chunks, which still take longer than it in all.
SLOW_READ_TIMEOUT_S = 6.0
SLOW_CHUNK_PAUSE_S = 1.0


@pytest.mark.parametrize("api_server", ["sqlite"], indirect=True)  # the HTTP layer's; no store behaviour
def test_a_slow_request_that_keeps_arriving_is_served(api_server: ApiServer) -> None:
    """The timeout is on silence, not on the request's whole duration."""
    server, thread, url = _serve(api_server.db_url, read_timeout=SLOW_READ_TIMEOUT_S)
    try:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            body = b'{"name": "slowly"}'
            sock.sendall(b"PUT /api/v1/namespaces/slow-ns HTTP/1.1\r\nHost: localhost\r\n")
            sock.sendall(b"Authorization: Bearer s3cret-test-token\r\nContent-Type: application/json\r\n")
            sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body))
            started = time.monotonic()
            for index in range(0, len(body), 2):
                time.sleep(SLOW_CHUNK_PAUSE_S)
                sock.sendall(body[index : index + 2])
            assert time.monotonic() - started > SLOW_READ_TIMEOUT_S  # longer than the timeout in all
            status, _, _ = _answer(sock)
            assert status == 200
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(api_server: ApiServer) -> None:
    with _connect(api_server) as sock:
        assert sock.recv(1024) == b""


def test_keep_alive_requests_on_one_connection_still_work(api_server: ApiServer) -> None:
    with _connect(api_server) as sock:
        for _ in range(2):
            sock.sendall(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: localhost\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200")
            length = int(
                next(
                    line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
                ).split(b":")[1]
            )
            while len(body) < length:
                body += sock.recv(65536)


def test_the_read_timeout_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]
    monkeypatch.delenv("LOTLINE_READ_TIMEOUT", raising=False)
    assert load_settings().read_timeout == DEFAULT_READ_TIMEOUT_S == Settings("x", "y", None).read_timeout
    monkeypatch.setenv("LOTLINE_READ_TIMEOUT", "2.5")
    assert load_settings().read_timeout == 2.5
    for bad in ("soon", "0", "-3", "nan", "inf"):
        monkeypatch.setenv("LOTLINE_READ_TIMEOUT", bad)
        with pytest.raises(InvalidInput, match="LOTLINE_READ_TIMEOUT"):
            load_settings()
