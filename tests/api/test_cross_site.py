"""Issue 29, point 6: cross-site writes. A web page the operator visits can make the browser send
a POST to a lotline on localhost: without a token, one with ``Content-Type: text/plain`` (no CORS
preflight) held a lot (200), and a DNS-rebound name reached every route. Now every route,
the event POSTs included, refuses a write whose body is not JSON (415), a write from another
``Origin`` (403), and any request for a ``Host`` not allowed (421); the server's own pages and
the JSON clients keep working. Against real servers without a token, on SQLite and PostgreSQL."""

from __future__ import annotations

import gzip
import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlparse

import pytest
import requests

from api.conftest import ApiServer, _serve
from lotline.domain.errors import InvalidInput
from lotline.services import Lineage
from lotline.services.config import LOOPBACK_HOSTS, Settings, load_settings, parse_allowed_hosts
from lotline.store.engine import Store
from support.lots import LotWorld
from support.ol import run_event

DAY = "2023-01-01"
#: A name this test's server is configured to answer for, beside the loopback ones.
EXTRA_HOST = "lotline.internal"


@pytest.fixture(scope="module")
def open_server(api_server: ApiServer) -> Iterator[ApiServer]:
    """A second server over the same database, as deployed by default: no token."""
    allowed = parse_allowed_hosts(EXTRA_HOST)
    server, thread, url = _serve(api_server.db_url, token=None, allowed_hosts=allowed)
    yield ApiServer(url, api_server.backend, api_server.db_url)
    server.should_exit = True
    thread.join(timeout=30)


@pytest.fixture
def world(open_server: ApiServer, fresh_ns: str) -> Iterator[LotWorld]:
    lineage = Lineage.over(Store(open_server.db_url))
    world = LotWorld(lineage, fresh_ns)
    world.job("ingest", output="raw")
    world.produce("ingest", DAY)
    yield world
    lineage.close()


def _hold_url(server: ApiServer, world: LotWorld) -> str:
    parts = ("namespaces", world.ns, "datasets", "raw", "lots", DAY, "hold")
    return server.api("/" + "/".join(quote(p, safe="") for p in parts))


def _port(server: ApiServer) -> int:
    port = urlparse(server.url).port
    if port is None:
        raise ValueError(server.url)
    return port


def _refused(answer: requests.Response, status: int) -> str:
    assert answer.status_code == status, answer.text
    document = answer.json()
    assert set(document) == {"code", "message"} and document["code"] == status
    message: str = document["message"]
    return message


def test_a_cross_site_text_plain_post_holds_nothing(open_server: ApiServer, world: LotWorld) -> None:
    """What a page elsewhere can send without a preflight: a text/plain (or form) body, with its
    Origin. Both halves are refused, and the lot stays READY."""
    url = _hold_url(open_server, world)
    for headers in (
        {"Content-Type": "text/plain"},  # no Origin: an old browser, or a same-origin text body
        {"Content-Type": "application/x-www-form-urlencoded"},
        {"Content-Type": "multipart/form-data; boundary=x"},
    ):
        answer = requests.post(url, data="x=1", headers=headers, timeout=10)
        assert "application/json" in _refused(answer, 415)
    foreign = {"Origin": "http://evil.example", "Content-Type": "application/json"}
    assert "evil.example" in _refused(requests.post(url, headers=foreign, timeout=10), 403)
    port = _port(open_server)
    for origin in ("null", f"http://localhost:{port}", f"http://127.0.0.1:{port + 1}"):
        _refused(requests.post(url, headers={"Origin": origin}, timeout=10), 403)
    assert world.status("raw", DAY, "ingest") == "READY"
    # The server's own page (its origin) and plain clients (no Origin, no body or a JSON one) hold it.
    own = {"Origin": open_server.url, "Content-Type": "application/json"}
    assert requests.post(url, headers=own, timeout=10).json() == {"held": True, "changed": True}
    assert world.status("raw", DAY, "ingest") == "HOLD"
    release = url.removesuffix("/hold") + "/release"
    assert requests.post(release, timeout=10).status_code == 200  # marquez-python's bodyless POST
    assert requests.post(url, json={}, timeout=10).status_code == 200


def test_event_posts_need_json_and_the_servers_origin(open_server: ApiServer, fresh_ns: str) -> None:
    """``POST /lineage`` (and ``/lineage/batch``) skip FastAPI but not the guard: a text/plain
    event from another site is journaled nowhere; JSON (also gzipped) from a client is."""
    run_id = str(uuid.uuid4())
    event = run_event(fresh_ns, "job", run_id, "START")
    body = json.dumps(event).encode()
    lineage, batch = open_server.api("/lineage"), open_server.api("/lineage/batch")
    _refused(requests.post(lineage, data=body, headers={"Content-Type": "text/plain"}, timeout=10), 415)
    _refused(requests.post(lineage, data=body, timeout=10), 415)  # a body must say it is JSON
    batch_body = json.dumps([event]).encode()
    _refused(requests.post(batch, data=batch_body, headers={"Content-Type": "text/plain"}, timeout=10), 415)
    foreign = {"Content-Type": "application/json", "Origin": "http://evil.example"}
    _refused(requests.post(lineage, data=body, headers=foreign, timeout=10), 403)
    runs = open_server.api(f"/jobs/runs/{run_id}")
    assert requests.get(runs, timeout=10).status_code == 404  # nothing was journaled
    gzipped = {"Content-Type": "application/json; charset=utf-8", "Content-Encoding": "gzip"}
    assert requests.post(lineage, data=gzip.compress(body), headers=gzipped, timeout=10).status_code == 201
    assert requests.get(runs, timeout=10).json()["state"] == "RUNNING"


def _raw(server: ApiServer, method: str, path: str, headers: list[str], body: bytes = b"") -> tuple[int, str]:
    """One request as written (``requests`` cannot send two headers of a name, nor none ``Host``):
    its status and its JSON message."""
    lines = [f"{method} {urlparse(server.api(path)).path} HTTP/1.1", *headers, "Connection: close"]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    with socket.create_connection(("127.0.0.1", _port(server)), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, answer = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    document = json.loads(answer) if answer.startswith(b"{") else {}
    return status, str(document.get("message", ""))


def test_no_host_two_hosts_or_two_origins_are_refused_and_change_nothing(
    open_server: ApiServer, world: LotWorld, fresh_ns: str
) -> None:
    """Issue 39.18: a request with no ``Host`` or two was served (the last one checked), and with
    two ``Origin`` headers the last decided. Refused on reads and writes, REST and the event POSTs
    (``ingest.IngestHandler``), with nothing held or journaled; one of each is still served."""
    port = _port(open_server)
    own_host, own_origin = f"Host: 127.0.0.1:{port}", f"Origin: http://127.0.0.1:{port}"
    json_type = "Content-Type: application/json"
    hold = "/" + "/".join(quote(p, safe="") for p in ("namespaces", world.ns, "datasets", "raw", "lots", DAY))
    run_id = str(uuid.uuid4())
    event = json.dumps(run_event(fresh_ns, "job", run_id, "START")).encode()
    for headers in ([], [own_host, own_host], [own_host, "Host: evil.example"]):
        status, message = _raw(open_server, "GET", "/namespaces", headers)
        assert (status, message) == (400, "a request carries exactly one Host header.")
        assert _raw(open_server, "POST", hold + "/hold", [*headers, json_type])[0] == 400
        assert _raw(open_server, "POST", "/lineage", [*headers, json_type], event)[0] == 400
    for origins in ([own_origin, own_origin], ["Origin: http://evil.example", own_origin]):
        status, message = _raw(open_server, "POST", hold + "/hold", [own_host, *origins, json_type])
        assert (status, message) == (403, "a request carries one Origin header at most.")
        assert _raw(open_server, "POST", "/lineage", [own_host, *origins, json_type], event)[0] == 403
        assert _raw(open_server, "GET", "/namespaces", [own_host, *origins])[0] == 403
    assert world.status("raw", DAY, "ingest") == "READY"
    assert requests.get(open_server.api(f"/jobs/runs/{run_id}"), timeout=10).status_code == 404
    assert _raw(open_server, "POST", "/lineage", [own_host, own_origin, json_type], event)[0] == 201
    assert _raw(open_server, "POST", hold + "/hold", [own_host, own_origin, json_type])[0] == 200
    assert world.status("raw", DAY, "ingest") == "HOLD"


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_an_unknown_host_is_refused_on_every_route(
    open_server: ApiServer, world: LotWorld, method: str
) -> None:
    """DNS rebinding: a page at evil.example whose name now points at 127.0.0.1 sends its requests
    with ``Host: evil.example`` (same origin to the browser). Reads and writes are refused."""
    port = _port(open_server)
    url = _hold_url(open_server, world) if method == "POST" else open_server.api("/namespaces")
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}"):
        answer = requests.request(method, url, headers={"Host": host}, timeout=10)
        assert "evil.example" in _refused(answer, 421)
    rebound = {"Host": "evil.example"}
    _refused(requests.post(open_server.api("/lineage"), json={}, headers=rebound, timeout=10), 421)
    pages = requests.get(open_server.url + "/", headers={"Host": f"evil.example:{port}"}, timeout=10)
    assert pages.status_code == 421
    assert world.status("raw", DAY, "ingest") == "READY"
    # The loopback names, in any case, and the configured one are served.
    for host in (f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}", f"{EXTRA_HOST}:{port}"):
        answer = requests.get(open_server.api("/namespaces"), headers={"Host": host}, timeout=10)
        assert answer.status_code == 200


def test_the_allowed_hosts_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for key in ("LOTLINE_ALLOWED_HOSTS",):
        monkeypatch.delenv(key, raising=False)
    assert load_settings().allowed_hosts == LOOPBACK_HOSTS == Settings("x", "y", None).allowed_hosts
    (tmp_path / "lotline.toml").write_text('LOTLINE_ALLOWED_HOSTS = "Lotline.Internal, 10.0.0.5, ::2"\n')
    assert load_settings().allowed_hosts == (*LOOPBACK_HOSTS, "lotline.internal", "10.0.0.5", "[::2]")
    monkeypatch.setenv("LOTLINE_ALLOWED_HOSTS", "*")
    assert load_settings().allowed_hosts == (*LOOPBACK_HOSTS, "*")
    # lotline serve --host adds the address it binds to.
    assert Settings("x", "y", None).serving_on("10.1.2.3").allowed_hosts == (*LOOPBACK_HOSTS, "10.1.2.3")
    assert Settings("x", "y", None).serving_on("::1").allowed_hosts == LOOPBACK_HOSTS
    for bad in ("http://lotline.internal", "lotline.internal:5000", "a/b", "two words"):
        monkeypatch.setenv("LOTLINE_ALLOWED_HOSTS", bad)
        with pytest.raises(InvalidInput, match="LOTLINE_ALLOWED_HOSTS"):
            load_settings()
