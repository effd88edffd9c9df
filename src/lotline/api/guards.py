"""Request guards that run before routing: bearer auth on writes, and the request body size limit."""

from __future__ import annotations

import hmac
from typing import NamedTuple

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lotline.domain.errors import InvalidInput

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_BODY_BYTES = 16 * 1024 * 1024
Headers = tuple[tuple[bytes, bytes], ...]


async def send_json(send: Send, status: int, document: object, extra: Headers = ()) -> None:
    """A whole JSON answer, for handlers that speak ASGI directly."""
    body = orjson.dumps(document)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, status: int, message: str, extra: Headers = ()) -> None:
    await send_json(send, status, {"code": status, "message": message}, extra)


class Refusal(NamedTuple):
    """Why a request is answered without being read: the status, message and extra headers."""

    status: int
    message: str
    headers: Headers = ()

    async def send(self, send: Send) -> None:
        await send_error(send, self.status, self.message, self.headers)


class Guard:
    """What every request is checked for before anything reads its body or routes it, in this
    order: a ``Content-Length`` within the limit (413), then, with a token configured,
    ``Authorization: Bearer <token>`` on every write (401); reads stay open.

    One pass over the headers, shared by ``GuardMiddleware`` (in front of FastAPI) and the event
    POSTs' handler (``api/ingest.py``), which also enforce the limit on streamed bodies."""

    def __init__(self, token: str | None, limit: int = MAX_BODY_BYTES) -> None:
        self.limit = limit
        self._expected = token.encode() if token else None
        self.too_large = Refusal(413, BodyTooLarge(limit).message)

    def refusal(self, scope: Scope) -> Refusal | None:
        length = None
        authorizations: list[bytes] = []
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
            elif name == b"authorization":
                authorizations.append(value)
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            return self.too_large
        if len(authorizations) > 1:  # which one counts would be a guess: refuse, do not pick
            return Refusal(400, "a request carries one Authorization header at most.")
        if (
            self._expected is not None
            and scope["method"] not in READ_METHODS
            and not self._authorized(authorizations[0] if authorizations else b"")
        ):
            return Refusal(
                401,
                "this server requires 'Authorization: Bearer <token>' for writes.",
                ((b"www-authenticate", b"Bearer"),),
            )
        return None

    def _authorized(self, authorization: bytes) -> bool:
        """``Bearer <token>``, the scheme in any case (RFC 7235), the token compared in constant time."""
        scheme, _, credentials = authorization.partition(b" ")
        expected = self._expected or b""
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), expected)


class GuardMiddleware:
    """``Guard`` in front of an ASGI app; a streamed body past the limit is also a 413.

    That 413 is sent from here, and the app is told the client went away: FastAPI turns any
    error raised while it reads a body into a 400 of its own, which is then not sent."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.guard.refusal(scope)
        if refusal is not None:
            await refusal.send(send)
            return
        limit, received = self.guard.limit, 0
        answered = refused = False

        async def counting_receive() -> Message:
            nonlocal received, refused
            message = await receive()
            received += len(message.get("body", b""))
            if received <= limit:
                return message
            if not answered and not refused:
                refused = True
                await self.guard.too_large.send(send)
            return {"type": "http.disconnect"}

        async def guarded_send(message: Message) -> None:
            nonlocal answered
            if not refused:
                answered = True
                await send(message)

        await self.app(scope, counting_receive, guarded_send)


class BodyTooLarge(InvalidInput):
    """A body past the limit, as sent or once inflated."""

    code = "body_too_large"
    http_status = 413

    def __init__(self, limit: int = MAX_BODY_BYTES) -> None:
        super().__init__(f"the request body is larger than {limit} bytes.")
