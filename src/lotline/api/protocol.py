"""The server's HTTP/1.1 connections: uvicorn's httptools protocol, with lotline's answers and limits.

What uvicorn leaves to the application cannot reach FastAPI's error handlers, because no request
exists yet; this is where lotline answers it as every other error, ``{"code", "message"}`` JSON:

- a request the HTTP parser refuses (a non-numeric or doubled ``Content-Length``, a broken request
  line) is a 400 (uvicorn: plain text);
- request headers (with the request line) over ``MAX_HEADER_BYTES`` are a 431 (uvicorn: no limit);
- a request whose headers or body stop arriving for ``read_timeout`` seconds is a 408 and the
  connection is closed (uvicorn: held open for ever); a new connection that sends nothing for as
  long is closed without an answer. Keep-alive between requests stays uvicorn's
  (``timeout_keep_alive``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from lotline.services.config import load_settings

MAX_HEADER_BYTES = 64 * 1024
_REASONS = {400: b"Bad Request", 408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


class _HeadersTooLarge(Exception):
    """Raised from a parser callback: httptools turns it into a parser error."""


class LotlineHttpProtocol(HttpToolsProtocol):
    #: Seconds a request may stall while it is read; None: ``LOTLINE_READ_TIMEOUT`` (settings).
    read_timeout: float | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.read_timeout is None:  # read once per process, not per connection
            type(self).read_timeout = load_settings().read_timeout
        self._timeout: float = type(self).read_timeout or load_settings().read_timeout
        self._reading: asyncio.TimerHandle | None = None
        self._in_request = False
        self._header_bytes = 0
        self._too_large = False

    # -- connection ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a connection that never sends a request does not stay open

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._disarm()
        super().data_received(data)
        if self._in_request and not self.transport.is_closing():
            self._arm()  # the request is incomplete: it must go on arriving

    # -- parser callbacks -----------------------------------------------------------------------
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_request = True
        self._header_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_message_complete(self) -> None:
        self._in_request = False
        self._disarm()
        super().on_message_complete()

    # -- answers ------------------------------------------------------------------------------
    def send_400_response(self, msg: str) -> None:
        """Called by uvicorn for anything the parser refuses (our 431 included)."""
        if self._too_large:
            self._answer(431, f"The request's headers exceed {MAX_HEADER_BYTES} bytes.")
        else:
            self._answer(400, "Malformed HTTP request (e.g. a Content-Length that is not one number).")

    def _count(self, size: int) -> None:
        self._header_bytes += size
        if self._header_bytes > MAX_HEADER_BYTES:
            self._too_large = True
            raise _HeadersTooLarge

    def _answer(self, status: int, message: str) -> None:
        self._in_request = False
        self._disarm()
        body = json.dumps({"code": status, "message": message}).encode()
        head = [
            b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status]),
            *(name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        self.transport.close()

    # -- the read timeout ---------------------------------------------------------------------
    def _arm(self) -> None:
        self._reading = self.loop.call_later(self._timeout, self._stalled)

    def _disarm(self) -> None:
        if self._reading is not None:
            self._reading.cancel()
            self._reading = None

    def _stalled(self) -> None:
        self._reading = None
        if self.transport.is_closing():
            return
        if self.flow is not None and self.flow.read_paused:
            self._arm()  # the server stopped reading (the app has not taken the body yet): not the client
            return
        answering = self.cycle is not None and self.cycle.response_started
        if self._in_request and not answering:
            self._answer(408, f"The request stopped arriving for {self._timeout:g} s; send it whole.")
        elif not self._in_request and self.cycle is None:
            self.transport.close()  # connected, never asked anything
