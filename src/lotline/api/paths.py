"""Names with ``/`` in one path segment (Marquez clients send ``s3://bucket`` as ``s3%3A%2F%2Fbucket``).

ASGI servers decode ``%2F`` in ``scope["path"]``, which would split such a name into several
segments. This middleware rebuilds the path from ``raw_path`` with the slashes *inside* a
segment replaced by a private-use character, and the ``seg`` convertor turns them back, so a
route ``/namespaces/{namespace:seg}`` receives the whole name.
"""

from __future__ import annotations

import json
from urllib.parse import unquote_to_bytes

from starlette.convertors import Convertor, register_url_convertor
from starlette.types import ASGIApp, Receive, Scope, Send

SLASH_STANDIN = "\uf8ff"


class SegmentConvertor(Convertor[str]):
    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return value.replace(SLASH_STANDIN, "/")

    def to_string(self, value: str) -> str:
        return value.replace("/", SLASH_STANDIN)


register_url_convertor("seg", SegmentConvertor())


class EncodedSlashMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw:
            try:
                segments = [
                    unquote_to_bytes(part).decode("utf-8")
                    for part in raw.split(b"?", 1)[0].decode("ascii").split("/")
                ]
            except UnicodeDecodeError:
                await _bad_path(send, "the request path is not valid percent-encoded UTF-8.")
                return
            if any(SLASH_STANDIN in s for s in segments):
                await _bad_path(send, "the request path contains the reserved character U+F8FF.")
                return
            scope["path"] = "/".join(s.replace("/", SLASH_STANDIN) for s in segments)
        await self.app(scope, receive, send)


async def _bad_path(send: Send, message: str) -> None:
    body = json.dumps({"code": 400, "message": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})
