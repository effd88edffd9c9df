"""Issue 14, point 7 (authorization): the ``Bearer`` scheme in any case (RFC 7235), and a request
with two ``Authorization`` headers refused instead of resolved by their order."""

from __future__ import annotations

import http.client
import json
from urllib.parse import quote, urlsplit

import requests

from api.conftest import TOKEN, ApiServer


def _put_namespace(server: ApiServer, ns: str, authorizations: list[str]) -> int:
    """PUT a namespace with exactly these Authorization headers (http.client sends repeats)."""
    target = urlsplit(server.url)
    connection = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=10)
    body = json.dumps({"ownerName": "t"}).encode()
    connection.putrequest("PUT", f"/api/v1/namespaces/{quote(ns, safe='')}")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", str(len(body)))
    for value in authorizations:
        connection.putheader("Authorization", value)
    connection.endheaders(body)
    status = connection.getresponse().status
    connection.close()
    return status


def test_the_scheme_is_case_insensitive_and_two_headers_are_refused(
    api_server: ApiServer, fresh_ns: str
) -> None:
    for scheme in ("Bearer", "bearer", "BEARER"):
        assert _put_namespace(api_server, fresh_ns, [f"{scheme} {TOKEN}"]) == 200, scheme
    assert _put_namespace(api_server, fresh_ns, [f"Bearer {TOKEN}x"]) == 401
    assert _put_namespace(api_server, fresh_ns, [f"Basic {TOKEN}"]) == 401
    assert _put_namespace(api_server, fresh_ns, []) == 401
    assert _put_namespace(api_server, fresh_ns, [f"Bearer {TOKEN}", "Bearer wrong"]) == 400
    assert _put_namespace(api_server, fresh_ns, ["Bearer wrong", f"Bearer {TOKEN}"]) == 400
    assert requests.get(api_server.api("/namespaces"), timeout=10).status_code == 200  # reads stay open
