"""Webhook delivery of lot events, to a real HTTP receiver, on SQLite and PostgreSQL: in order, at
least once, backing off after failures, resuming from the stored position — also after the
deliverer process is killed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lotline.domain.errors import InvalidInput
from lotline.services import Lineage
from lotline.services.webhooks import http_post
from lotline.store.types import utcnow
from support.lots import LotWorld
from support.polling import wait_until


class Receiver:
    """An HTTP endpoint that refuses its first ``fail_first`` requests with 503, then records bodies."""

    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.bodies: list[dict[str, object]] = []
        self.requests = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests += 1
                if receiver.requests <= receiver.fail_first:
                    self.send_response(503)
                else:
                    receiver.bodies.append(json.loads(body))
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def positions(self) -> list[int]:
        return [e["position"] for b in self.bodies for e in b["events"]]  # type: ignore[index, union-attr]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver(fail_first=2)
    yield found
    found.server.shutdown()


def _publish(world: LotWorld, *lots: str) -> None:
    world.produce("ingest", *lots)


def test_events_are_delivered_in_order_after_backing_off(lineage: Lineage, receiver: Receiver) -> None:
    world = LotWorld(lineage, "hooks")
    world.job("ingest", output="raw")
    _publish(world, "before")  # appended before the URL was first seen: not sent
    now = utcnow()
    assert lineage.webhooks.deliver(receiver.url, now=now).sent == 0  # first sight: starts at the end
    _publish(world, "d1", "d2")
    first = lineage.webhooks.deliver(receiver.url, now=now)
    assert first.sent == 0 and first.error == "HTTP 503"
    assert (
        lineage.webhooks.deliver(receiver.url, now=now + timedelta(milliseconds=500)).sent == 0
    )  # waits 1 s
    second = lineage.webhooks.deliver(receiver.url, now=now + timedelta(seconds=1))
    assert second.error == "HTTP 503"
    assert lineage.webhooks.deliver(receiver.url, now=now + timedelta(seconds=2)).sent == 0  # now 2 s
    third = lineage.webhooks.deliver(receiver.url, now=now + timedelta(seconds=3))
    assert third.sent == 2
    lots = [e["lot"] for b in receiver.bodies for e in b["events"]]  # type: ignore[index, union-attr]
    assert lots == ["d1", "d2"] and receiver.positions() == sorted(receiver.positions())
    _publish(world, "d3")
    assert (
        lineage.webhooks.deliver(receiver.url, now=now + timedelta(seconds=3)).sent == 1
    )  # no back-off left
    assert [e["lot"] for e in receiver.bodies[-1]["events"]] == ["d3"]  # type: ignore[index, union-attr]


def test_an_unreachable_url_backs_off_and_bad_urls_are_refused(lineage: Lineage) -> None:
    world = LotWorld(lineage, "hooks")
    world.job("ingest", output="raw")
    dead = "http://127.0.0.1:9/hook"
    lineage.webhooks.deliver(dead)
    _publish(world, "d1")
    result = lineage.webhooks.deliver(dead)
    assert result.sent == 0 and result.error is not None and "Error" in result.error
    with pytest.raises(InvalidInput):
        lineage.webhooks.deliver("file:///etc/passwd")


def _start_deliverer(backend_url: str, urls: list[str], cwd: Path) -> subprocess.Popen[str]:
    """``lotline webhooks`` as a separate process, over ``backend_url``, to ``urls``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")}
    env.update(LOTLINE_DB_URL=backend_url, LOTLINE_WEBHOOK_URLS=",".join(urls))
    command = [sys.executable, "-m", "lotline", "webhooks", "--poll", "0.1"]
    return subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, text=True)


@contextmanager
def _running(deliverer: subprocess.Popen[str]) -> Iterator[None]:
    """Killed if the block fails; else it must stop on SIGTERM with exit 0."""
    try:
        yield
        deliverer.send_signal(signal.SIGTERM)
        assert deliverer.wait(timeout=60) == 0
    finally:
        if deliverer.poll() is None:
            deliverer.kill()


def _lots(receiver: Receiver) -> list[str]:
    return [e["lot"] for b in receiver.bodies for e in b["events"]]  # type: ignore[index, union-attr]


def test_a_killed_deliverer_resumes_from_its_stored_position(
    lineage: Lineage, backend_url: str, receiver: Receiver, tmp_path: Path
) -> None:
    receiver.fail_first = 0
    world = LotWorld(lineage, "hooks")
    world.job("ingest", output="raw")
    lineage.webhooks.deliver(receiver.url)  # the URL's position starts here

    def wait_for(count: int) -> None:
        wait_until(lambda: len(receiver.positions()) >= count, timeout=60, what=f"{count} events")

    killed = _start_deliverer(backend_url, [receiver.url], tmp_path)
    try:
        _publish(world, "d1", "d2")
        wait_for(2)
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=10)
    _publish(world, "d3", "d4")  # appended while no deliverer runs
    with _running(_start_deliverer(backend_url, [receiver.url], tmp_path)):
        wait_for(4)
    assert sorted(set(_lots(receiver))) == ["d1", "d2", "d3", "d4"]  # none lost (at least once)
    # In order: each batch ascends, and no event arrives for the first time before an earlier one.
    # The killed deliverer may have been killed after a POST and before storing its position: then
    # the next one sends those events again (at least once, not exactly once), in order again.
    for body in receiver.bodies:
        batch = [e["position"] for e in body["events"]]  # type: ignore[union-attr]
        assert batch == sorted(batch)
    first_seen = list(dict.fromkeys(receiver.positions()))
    assert first_seen == sorted(first_seen)


class DrippingReceiver:
    """Issue 29, point 7: a receiver that reads the request, then answers one header byte every
    ``drip_s`` seconds, never finishing: each read of its answer succeeds well within any per-read
    timeout. ``connections`` counts the POSTs it has been sent."""

    def __init__(self, drip_s: float = 1.0) -> None:
        self.drip_s = drip_s
        self.connections = 0
        self.stopped = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/slow"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._drip, args=(connection,), daemon=True).start()

    def _drip(self, connection: socket.socket) -> None:
        answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100_000
        with connection:
            connection.recv(65536)
            for byte in answer:
                if self.stopped.wait(self.drip_s):
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    return  # the deliverer gave up on it

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()


@pytest.fixture
def dripping() -> Iterator[DrippingReceiver]:
    found = DrippingReceiver()
    yield found
    found.close()


def test_a_dripping_receiver_is_cut_off_at_the_deadline(lineage: Lineage, dripping: DrippingReceiver) -> None:
    """The deadline is on the whole answer, not on each read: the POST fails, the position stays."""
    world = LotWorld(lineage, "hooks")
    world.job("ingest", output="raw")
    lineage.webhooks.deliver(dripping.url)  # first sight
    _publish(world, "d1")
    result = lineage.webhooks.deliver(dripping.url, post=lambda url, body: http_post(url, body, deadline_s=2))
    assert result.sent == 0 and result.error is not None and "TimeoutError" in result.error, result
    assert dripping.connections == 1
    assert result.retry_at is not None
    waiting = lineage.webhooks.deliver(dripping.url, now=result.retry_at - timedelta(milliseconds=1))
    assert (waiting.sent, waiting.position) == (0, result.position)  # backing off, nothing moved past


# How the deliverer shares its time among URLs does not depend on the database (what it reads is
# the killed-deliverer test's, on both); once, on SQLite (issue 43).
@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_a_slow_receiver_does_not_hold_up_the_others(
    lineage: Lineage, backend_url: str, receiver: Receiver, dripping: DrippingReceiver, tmp_path: Path
) -> None:
    """``lotline webhooks`` with a dripping receiver listed first: the normal one gets every event
    while the slow one is stuck in its POST (on main, nothing reached the second URL)."""
    receiver.fail_first = 0
    world = LotWorld(lineage, "hooks")
    world.job("ingest", output="raw")
    for url in (dripping.url, receiver.url):
        lineage.webhooks.deliver(url)  # both positions start here
    with _running(_start_deliverer(backend_url, [dripping.url, receiver.url], tmp_path)):
        _publish(world, "d1", "d2")
        wait_until(lambda: dripping.connections >= 1, timeout=60, what="a POST to the slow receiver")
        wait_until(lambda: len(receiver.positions()) >= 2, timeout=60, what="d1, d2 at the normal receiver")
        _publish(world, "d3")  # appended while the slow receiver still drips
        wait_until(lambda: len(receiver.positions()) >= 3, timeout=60, what="d3 at the normal receiver")
    assert _lots(receiver) == ["d1", "d2", "d3"]
