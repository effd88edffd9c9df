"""Issue 29, point 8: long polls of the lot events (``GET /lots/events?wait=``) held a thread of
the server's pool each while they waited: 45 of them (the pool has 40) stalled every other plain
route until they timed out. Now a waiter holds no thread, is woken when an event arrives, and
waiters beyond the server's cap (``LOTLINE_MAX_EVENT_WAITERS``) get a 429. Real server, real
clients, SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from api.conftest import ApiServer, _serve
from lotline.domain.errors import InvalidInput
from lotline.services import Lineage
from lotline.services.config import DEFAULT_MAX_EVENT_WAITERS, Settings, load_settings
from lotline.store.engine import Store
from support.lots import LotWorld
from support.polling import wait_until

#: More than the thread pool that FastAPI's plain routes share (anyio's default: 40 threads).
WAITERS = 45


@pytest.fixture(scope="module")
def waiting_server(api_server: ApiServer) -> Iterator[ApiServer]:
    """A server over the session's database whose cap is exactly ``WAITERS``."""
    server, thread, url = _serve(api_server.db_url, max_event_waiters=WAITERS)
    yield ApiServer(url, api_server.backend, api_server.db_url)
    server.should_exit = True
    thread.join(timeout=30)


def _waiting(server: ApiServer) -> int:
    text = requests.get(f"{server.url}/metrics", timeout=30).text
    line = next(x for x in text.splitlines() if x.startswith("lotline_lot_event_waiters "))
    return int(line.split()[1])


def _last_position(server: ApiServer) -> int:
    position = 0
    while True:
        page = requests.get(server.api("/lots/events"), params={"after": position, "limit": 1000}, timeout=30)
        body = page.json()
        if not body["events"]:
            return int(body["lastPosition"])
        position = body["lastPosition"]


def test_waiters_hold_no_thread_and_the_cap_is_a_429(waiting_server: ApiServer, fresh_ns: str) -> None:
    position = _last_position(waiting_server)
    answers: list[requests.Response | None] = [None] * WAITERS

    def wait_for_events(index: int) -> None:
        params = {"after": position, "wait": 30}
        answers[index] = requests.get(waiting_server.api("/lots/events"), params=params, timeout=120)

    threads = [threading.Thread(target=wait_for_events, args=(i,), daemon=True) for i in range(WAITERS)]
    for thread in threads:
        thread.start()
    wait_until(lambda: _waiting(waiting_server) == WAITERS, timeout=60, what=f"{WAITERS} waiters")

    # Beyond the cap: refused at once, saying why; the other routes answer while they all wait.
    extra = requests.get(
        waiting_server.api("/lots/events"), params={"after": position, "wait": 30}, timeout=60
    )
    assert extra.status_code == 429 and extra.json()["code"] == 429, extra.text
    assert "LOTLINE_MAX_EVENT_WAITERS" in extra.json()["message"] and extra.headers["Retry-After"] == "1"
    assert requests.get(waiting_server.api("/namespaces"), timeout=60).status_code == 200
    assert requests.get(waiting_server.api("/jobs"), timeout=60).status_code == 200
    assert all(thread.is_alive() for thread in threads)  # none of the waiters has been answered
    assert answers == [None] * WAITERS

    # An event wakes them all, with it.
    with Lineage.over(Store(waiting_server.db_url)) as lineage:
        world = LotWorld(lineage, fresh_ns)
        world.job("ingest", output="raw")
        world.produce("ingest", "woken")
    for thread in threads:
        thread.join(timeout=120)
    for answer in answers:
        assert answer is not None and answer.status_code == 200, answer
        assert [(e["namespace"], e["lot"]) for e in answer.json()["events"]] == [(fresh_ns, "woken")]
    wait_until(lambda: _waiting(waiting_server) == 0, timeout=60, what="no waiters left")


def test_the_max_event_waiters_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOTLINE_MAX_EVENT_WAITERS", raising=False)
    assert (
        load_settings().max_event_waiters
        == DEFAULT_MAX_EVENT_WAITERS
        == Settings("x", "y", None).max_event_waiters
    )
    monkeypatch.setenv("LOTLINE_MAX_EVENT_WAITERS", "200")
    assert load_settings().max_event_waiters == 200
    for bad in ("-1", "many", "2.5"):
        monkeypatch.setenv("LOTLINE_MAX_EVENT_WAITERS", bad)
        with pytest.raises(InvalidInput, match="LOTLINE_MAX_EVENT_WAITERS"):
            load_settings()
