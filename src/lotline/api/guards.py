"""Request guards that run before routing: the Host allow-list, the request body size limit, and
on writes bearer auth, the same-origin check and JSON bodies."""

from __future__ import annotations

import hmac
from typing import NamedTuple

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lotline.domain.errors import InvalidInput
from lotline.services.config import ANY_HOST, LOOPBACK_HOSTS, host_name

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
    order: exactly one ``Host`` (400) and at most one ``Origin`` (403), for a request with two
    leaves which one counts to whoever reads it; a ``Host`` the server answers for (421: DNS
    rebinding), a ``Content-Length`` within the
    limit (413), then on every write (any method but GET/HEAD/OPTIONS): with a token configured,
    ``Authorization: Bearer <token>`` (401); no ``Origin`` but the server's own (403); a body sent
    as JSON (415). Reads stay open.

    The last two stop cross-site writes from a web page the operator visits, with or without a
    token: a browser sends such a page's POST with its ``Origin``, and only ``text/plain``, form or
    multipart bodies go out without a CORS preflight, which this server never grants. A write
    without a body and without a ``Content-Type`` passes (marquez-python's run transitions and tag
    POSTs send none); the ``Origin`` check covers it.

    One pass over the headers, shared by ``GuardMiddleware`` (in front of FastAPI) and the event
    POSTs' handler (``api/ingest.py``), which also enforce the limit on streamed bodies."""

    def __init__(
        self, token: str | None, allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS, limit: int = MAX_BODY_BYTES
    ) -> None:
        self.limit = limit
        self._expected = token.encode() if token else None
        self._any_host = ANY_HOST in allowed_hosts
        self._hosts = frozenset(allowed_hosts)
        self.too_large = Refusal(413, BodyTooLarge(limit).message)

    def refusal(self, scope: Scope) -> Refusal | None:
        seen = _Seen.of(scope["headers"])
        if seen.hosts != 1:  # which host was meant would be a guess (issue 39.18): refuse, do not pick
            return Refusal(400, "a request carries exactly one Host header.")
        if len(seen.origins) > 1:  # the last would decide which origin sent it
            return Refusal(403, "a request carries one Origin header at most.")
        if not self._any_host and host_name(seen.host) not in self._hosts:
            return Refusal(
                421, f"this server does not answer for host {seen.host[:100]!r} (LOTLINE_ALLOWED_HOSTS)."
            )
        if seen.length is not None and (not seen.length.isdigit() or int(seen.length) > self.limit):
            return self.too_large
        if len(seen.authorizations) > 1:  # which one counts would be a guess: refuse, do not pick
            return Refusal(400, "a request carries one Authorization header at most.")
        if scope["method"] in READ_METHODS:
            return None
        return self._write_refusal(seen)

    def _write_refusal(self, seen: _Seen) -> Refusal | None:
        if self._expected is not None and not self._authorized(
            seen.authorizations[0] if seen.authorizations else b""
        ):
            return Refusal(
                401,
                "this server requires 'Authorization: Bearer <token>' for writes.",
                ((b"www-authenticate", b"Bearer"),),
            )
        origin = seen.origins[0] if seen.origins else None
        if origin is not None and not _same_origin(origin, seen.host):
            return Refusal(403, f"writes from another origin ({origin[:100]!r}) are refused.")
        has_body = seen.chunked or (seen.length is not None and int(seen.length) > 0)
        types = seen.content_types
        if (types or has_body) and not (types and all(map(_is_json, types))):
            return Refusal(415, "a write's body must be sent as 'Content-Type: application/json'.")
        return None

    def _authorized(self, authorization: bytes) -> bool:
        """``Bearer <token>``, the scheme in any case (RFC 7235), the token compared in constant time."""
        scheme, _, credentials = authorization.partition(b" ")
        expected = self._expected or b""
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), expected)


class _Seen(NamedTuple):
    """The headers the guard reads, from one pass over them."""

    length: bytes | None
    #: The (last) ``Host``, and how many there were.
    host: str
    hosts: int
    origins: list[str]
    authorizations: list[bytes]
    content_types: list[bytes]
    chunked: bool

    @classmethod
    def of(cls, headers: Headers) -> _Seen:
        length = None
        host, hosts = "", 0
        origins: list[str] = []
        authorizations: list[bytes] = []
        content_types: list[bytes] = []
        chunked = False
        for name, value in headers:
            if name == b"content-length":
                length = value
            elif name == b"authorization":
                authorizations.append(value)
            elif name == b"host":
                host, hosts = value.decode("latin-1"), hosts + 1
            elif name == b"origin":
                origins.append(value.decode("latin-1"))
            elif name == b"content-type":
                content_types.append(value)
            elif name == b"transfer-encoding":
                chunked = True
        return cls(length, host, hosts, origins, authorizations, content_types, chunked)


def _is_json(content_type: bytes) -> bool:
    """``application/json`` or a ``+json`` type, parameters (``charset``) aside."""
    media = content_type.partition(b";")[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _same_origin(origin: str, host: str) -> bool:
    """Whether ``Origin`` (``scheme://host[:port]``; ``null`` from sandboxes and files) names the
    host and port the request was sent to, as its ``Host`` header says."""
    scheme, separator, authority = origin.strip().lower().partition("://")
    if not separator or "/" in authority:
        return False
    target = host.strip().lower()
    default = _DEFAULT_PORTS.get(scheme)
    if default is not None:
        authority = authority.removesuffix(":" + default)
        target = target.removesuffix(":" + default)
    return authority == target


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
