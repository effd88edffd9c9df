"""Request guards that run before routing: bearer auth on writes, and the request body size limit."""

from __future__ import annotations

import hmac

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_BODY_BYTES = 16 * 1024 * 1024


async def send_json(
    send: Send, status: int, document: object, extra: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    """A whole JSON answer, for handlers that speak ASGI directly."""
    body = orjson.dumps(document)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_error(
    send: Send, status: int, message: str, extra: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    await send_json(send, status, {"code": status, "message": message}, extra)


class BearerAuthMiddleware:
    """With a token configured every write needs ``Authorization: Bearer <token>``; reads stay open."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.expected is not None and scope["type"] == "http" and scope["method"] not in READ_METHODS:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await send_error(
                    send,
                    401,
                    "this server requires 'Authorization: Bearer <token>' for writes.",
                    ((b"www-authenticate", b"Bearer"),),
                )
                return
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """413 for bodies over the limit, whether announced by Content-Length or streamed."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await send_error(send, 413, f"the request body is larger than {self.limit} bytes.")
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                raise BodyTooLarge(self.limit)
            return message

        try:
            await self.app(scope, counting_receive, send)
        except BodyTooLarge:
            await send_error(send, 413, f"the request body is larger than {self.limit} bytes.")


class BodyTooLarge(Exception):
    """Raised while a handler reads a streamed body past the limit; mapped to 413 in errors.py."""

    def __init__(self, limit: int = MAX_BODY_BYTES) -> None:
        super().__init__(f"the request body is larger than {limit} bytes.")
        self.message = str(self)
