"""Group commit through a real server: many client processes posting at once, with repeats of
each other's events and, on PostgreSQL, one event the database refuses. Every 201 comes after
the event is committed, every event is journaled exactly once, and the refused one fails alone."""

from __future__ import annotations

import json
import re
import uuid

import requests
from sqlalchemy import func, select

from api.conftest import TOKEN, ApiServer
from lotline.store.engine import Store
from lotline.store.schema import lineage_events
from support.ol import run_event
from support.processes import separate_processes
from support.workers import post_events

CLIENTS = 6
OWN = 20
SHARED = 5


def _events_total(server: ApiServer) -> dict[str, int]:
    text = requests.get(f"{server.url}/metrics", timeout=10).text
    return {
        k: int(v) for k, v in re.findall(r'lotline_openlineage_events_total\{result="(\w+)"\} (\d+)', text)
    }


def _body(ns: str, job: str, **facets: object) -> bytes:
    return json.dumps(run_event(ns, job, str(uuid.uuid4()), "START", facets=facets or None)).encode()


def test_concurrent_clients_each_event_journaled_once_and_answered_after_commit(
    api_server: ApiServer, fresh_ns: str
) -> None:
    shared = [_body(fresh_ns, f"shared-{i}") for i in range(SHARED)]
    own = [[_body(fresh_ns, f"client-{c}-{i}") for i in range(OWN)] for c in range(CLIENTS)]
    refused = _body(fresh_ns, "refused", note={"text": "a\x00b"})
    # Each client posts its own events with every shared one among them; the first also posts the
    # event the database refuses (a NUL character: PostgreSQL's jsonb refuses it, and so does SQLite).
    bodies = []
    for mine in own:
        mixed = list(mine)
        for i, body in enumerate(shared):
            mixed.insert(2 * i + 1, body)
        bodies.append(mixed)
    bodies[0].insert(3, refused)
    before = _events_total(api_server)

    context = separate_processes()
    barrier = context.Manager().Barrier(CLIENTS)
    with context.Pool(CLIENTS) as pool:
        statuses = pool.starmap(
            post_events, [(api_server.url, api_server.db_url, TOKEN, b, barrier) for b in bodies]
        )

    assert statuses[0][3] == 400
    assert all(
        s == 201 for i, client in enumerate(statuses) for j, s in enumerate(client) if (i, j) != (0, 3)
    )
    store = Store(api_server.db_url)
    try:
        with store.read() as connection:
            counts = connection.execute(
                select(lineage_events.c.job_name, func.count())
                .where(lineage_events.c.job_namespace == fresh_ns)
                .group_by(lineage_events.c.job_name)
            ).all()
    finally:
        store.dispose()
    expected = {f"client-{c}-{i}" for c in range(CLIENTS) for i in range(OWN)} | {
        f"shared-{i}" for i in range(SHARED)
    }
    assert dict(counts) == dict.fromkeys(expected, 1)
    after = _events_total(api_server)
    assert after["accepted"] - before["accepted"] == len(expected)
    assert after["duplicate"] - before["duplicate"] == (CLIENTS - 1) * SHARED
    assert after["rejected"] - before["rejected"] == 1
