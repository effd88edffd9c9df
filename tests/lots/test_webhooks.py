"""Webhook delivery of lot events, to a real HTTP receiver, on SQLite and PostgreSQL: in order, at
least once, backing off after failures, resuming from the stored position — also after the
deliverer process is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lotline.domain.errors import InvalidInput
from lotline.services import Lineage
from lotline.store.types import utcnow
from support.lots import LotWorld


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


def test_a_killed_deliverer_resumes_from_its_stored_position(
    lineage: Lineage, backend_url: str, receiver: Receiver, tmp_path: Path
) -> None:
    receiver.fail_first = 0
    world = LotWorld(lineage, "hooks")
    world.job("ingest", output="raw")
    lineage.webhooks.deliver(receiver.url)  # the URL's position starts here
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")}
    env.update(LOTLINE_DB_URL=backend_url, LOTLINE_WEBHOOK_URLS=receiver.url)
    command = [sys.executable, "-m", "lotline", "webhooks", "--poll", "0.1"]

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True)

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 60
        while len(receiver.positions()) < count:
            assert time.monotonic() < deadline, receiver.positions()
            time.sleep(0.1)

    deliverer = start()
    try:
        _publish(world, "d1", "d2")
        wait_for(2)
        deliverer.send_signal(signal.SIGKILL)
        deliverer.wait(timeout=10)
        _publish(world, "d3", "d4")  # appended while no deliverer runs
        deliverer = start()
        wait_for(4)
        deliverer.send_signal(signal.SIGTERM)
        assert deliverer.wait(timeout=30) == 0
    finally:
        if deliverer.poll() is None:
            deliverer.kill()
    lots = [e["lot"] for b in receiver.bodies for e in b["events"]]  # type: ignore[index, union-attr]
    assert sorted(set(lots)) == ["d1", "d2", "d3", "d4"]  # none lost (at least once)
    assert receiver.positions() == sorted(receiver.positions())  # in order
