"""The lot event log over REST against a real server: positions, dataset filters, waiting, errors."""

from __future__ import annotations

import threading
import time

import requests

from api.conftest import ApiServer
from lotline.services import Lineage
from lotline.store.engine import Store
from support.lots import LotWorld


def _events(http: requests.Session, server: ApiServer, **params: object) -> dict[str, object]:
    answer = http.get(server.api("/lots/events"), params=params, timeout=40)
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


def test_events_from_a_position_filtered_by_dataset(
    api_server: ApiServer, fresh_ns: str, http: requests.Session
) -> None:
    with Lineage.over(Store(api_server.db_url)) as lineage:
        world = LotWorld(lineage, fresh_ns)
        world.job("ingest", output="raw")
        world.job("clean", output="cleaned", inputs=["raw"])
        elsewhere = LotWorld(lineage, f"{fresh_ns}-elsewhere")
        elsewhere.job("ingest", output="raw")
        start = _events(http, api_server, after=0, limit=1000)
        while start["events"]:  # the session's server is shared: start after what is there
            start = _events(http, api_server, after=start["lastPosition"], limit=1000)
        position = start["lastPosition"]
        world.produce("ingest", "d1", "d2")
        world.produce("clean", "d1")
        elsewhere.produce("ingest", "e1")
        lineage.lots.invalidate(fresh_ns, "raw", "d1")
        failing = world.claim("clean", "d2")
        assert failing is not None
        lineage.lots.fail(failing, error="ValueError: bad row 3")

    # Issue 29.12: the namespace filter applies without a dataset too.
    body = _events(http, api_server, after=position, namespace=fresh_ns)
    kinds = [(e["kind"], e["dataset"], e["lot"]) for e in body["events"]]  # type: ignore[union-attr, index]
    assert kinds == [
        ("READY", "raw", "d1"),
        ("READY", "raw", "d2"),
        ("READY", "cleaned", "d1"),
        ("REOPENED", "raw", "d1"),
        ("REOPENED", "cleaned", "d1"),
        ("FAILED", "cleaned", "d2"),
    ]
    failed = body["events"][-1]  # type: ignore[index]
    assert (failed["job"], failed["attempt"], failed["reason"], failed["runId"]) == (
        "clean",
        1,
        "ValueError: bad row 3",
        str(failing.run_id),
    )
    assert body["lastPosition"] == body["events"][-1]["position"]  # type: ignore[index]
    only = _events(http, api_server, after=position, namespace=fresh_ns, dataset="cleaned")
    assert [e["kind"] for e in only["events"]] == ["READY", "REOPENED", "FAILED"]  # type: ignore[union-attr, index]
    everywhere = _events(http, api_server, after=position)
    assert [e["lot"] for e in everywhere["events"]] == ["d1", "d2", "d1", "e1", "d1", "d1", "d2"]  # type: ignore[union-attr, index]
    paged = _events(http, api_server, after=position, limit=2)
    assert [e["lot"] for e in paged["events"]] == ["d1", "d2"]  # type: ignore[union-attr, index]


def test_waiting_returns_when_an_event_arrives(
    api_server: ApiServer, fresh_ns: str, http: requests.Session
) -> None:
    with Lineage.over(Store(api_server.db_url)) as lineage:
        world = LotWorld(lineage, fresh_ns)
        world.job("ingest", output="raw")
        last = _events(http, api_server, after=0, limit=1000)
        while last["events"]:
            last = _events(http, api_server, after=last["lastPosition"], limit=1000)
        later = threading.Timer(0.5, lambda: world.produce("ingest", "w1"))
        later.start()
        started = time.monotonic()
        body = _events(http, api_server, after=last["lastPosition"], wait=20)
        later.join()
    assert [e["lot"] for e in body["events"]] == ["w1"]  # type: ignore[union-attr, index]
    assert time.monotonic() - started < 20  # answered on arrival, not at the deadline


def test_bad_parameters_are_refused_and_unknown_datasets_404(
    api_server: ApiServer, fresh_ns: str, http: requests.Session
) -> None:
    malformed = ({"after": -1}, {"limit": 0}, {"wait": 31}, {"after": "x"})
    for params, status in [*((p, 422) for p in malformed), ({"dataset": "raw"}, 400)]:
        answer = http.get(api_server.api("/lots/events"), params=params, timeout=10)
        assert answer.status_code == status, (params, answer.text)
        assert set(answer.json()) == {"code", "message"}
    answer = http.get(
        api_server.api("/lots/events"), params={"namespace": fresh_ns, "dataset": "nope"}, timeout=10
    )
    assert answer.status_code == 404, answer.text
    answer = http.get(api_server.api("/lots/events"), params={"namespace": fresh_ns}, timeout=10)
    assert answer.status_code == 404 and set(answer.json()) == {"code", "message"}, answer.text
