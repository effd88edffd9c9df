"""OpenLineage ingest on PostgreSQL, next to a bare one-row-per-transaction insert of the same bodies.

Run: ``.venv/bin/python -m bench.ingest [--seconds S] [--rounds R] [--workers N] [--batch-clients C]``.

In one run, on one fresh database: ``--rounds`` times, the bare INSERT rate (8 connections) and
then the single-event ``POST /lineage`` acceptance rate (8 clients), each round's ratio from its
own two phases (this machine's speed drifts by 20-30% within minutes); then once the ``POST
/lineage/batch`` acceptance rate; and, for each API phase, the projection rate: events fully
applied to the lineage model per second, from the phase's start until the journal's backlog is
0 (the projector runs during the load, as deployed). Acceptance is not processing: both are
printed. Every phase is bounded in time and talks to 127.0.0.1 only; results go to
docs/benchmarks.md by hand.

Clients are separate processes, each with one keep-alive HTTP/1.1 connection over a plain
socket (``RawHttpClient``): the requests are built before the clock starts, so that a client
spends about as little CPU per request as the bare phase's psycopg does per row (``http.client``
took 0.29-0.38 ms per request, more than a whole bare row, on the same 2 cores). CPU per
event is reported for the clients, the server's HTTP process(es), its projector process(es)
(told apart by their positive niceness) and all of the database's PostgreSQL backends.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import requests
import sqlalchemy as sa

from bench._server import fresh_database, serve
from lotline.server.load import process_cpu_seconds

CLIENTS = 8
BATCH = 100
PORT = 5099


def events(worker: int, count: int) -> list[dict[str, Any]]:
    """START then COMPLETE of distinct runs, each reading one dataset and writing another."""
    out = []
    for i in range(count // 2):
        run_id = str(uuid.uuid4())
        for kind, minute in (("START", 0), ("COMPLETE", 1)):
            out.append(
                {
                    "eventType": kind,
                    "eventTime": f"2026-01-01T00:0{minute}:00Z",
                    "producer": "https://lotline.bench",
                    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                    "run": {"runId": run_id, "facets": {}},
                    "job": {"namespace": "bench", "name": f"job-{worker}-{i % 50}"},
                    "inputs": [] if kind != "START" else [{"namespace": "bench", "name": f"in-{worker}"}],
                    "outputs": [] if kind == "START" else [{"namespace": "bench", "name": f"out-{worker}"}],
                }
            )
    return out


class RawHttpClient:
    """One keep-alive HTTP/1.1 connection for requests built in advance (``request_bytes``) and
    answers with a ``Content-Length`` (what ``lotline serve`` sends): one ``sendall`` and usually
    one ``recv`` per request."""

    def __init__(self, url: str, timeout: float) -> None:
        parts = urlsplit(url)
        self._host = parts.netloc.encode()
        self._socket = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def request_bytes(self, path: str, body: bytes) -> bytes:
        head = (
            b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (path.encode(), self._host, len(body))
        )
        return head + body

    def send(self, request: bytes) -> tuple[int, bytes]:
        """The answer's status and body."""
        self._socket.sendall(request)
        received = b""
        while (end := received.find(b"\r\n\r\n")) < 0:
            received += self._receive()
        head, body = received[:end], received[end + 4 :]
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            body += self._receive()
        return int(head[9:12]), body

    def _receive(self) -> bytes:
        chunk = self._socket.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk

    def close(self) -> None:
        self._socket.close()


def _post_singles(args: tuple[str, int, float]) -> tuple[int, float, float]:
    url, worker, seconds = args
    client = RawHttpClient(url, timeout=60)
    requests_ = [
        client.request_bytes("/api/v1/lineage", json.dumps(e).encode()) for e in events(worker, 40_000)
    ]
    sent = _send_for(client, requests_, seconds, lambda status, _: status == 201)
    return sent, time.process_time() - _cpu_at_start, 0.0


def _post_batches(args: tuple[str, int, float, int]) -> tuple[int, float, float]:
    url, worker, seconds, most = args
    all_events = events(worker + 100, most)
    client = RawHttpClient(url, timeout=120)
    requests_ = [
        client.request_bytes("/api/v1/lineage/batch", json.dumps(all_events[i : i + BATCH]).encode())
        for i in range(0, len(all_events), BATCH)
    ]
    sent = _send_for(client, requests_, seconds, lambda status, text: status == 200 and _all_good(text))
    return sent * BATCH, time.process_time() - _cpu_at_start, 0.0


def _all_good(text: bytes) -> bool:
    return bool(json.loads(text)["status"] == "success")


def _send_for(
    client: RawHttpClient, requests_: list[bytes], seconds: float, good: Callable[[int, bytes], bool]
) -> int:
    """Once every client is ready, send requests for ``seconds`` (each answer must be ``good``);
    how many were sent. Closes the client."""
    sent = 0
    deadline = _ready(seconds)
    for request in requests_:
        if time.monotonic() > deadline:
            break
        status, text = client.send(request)
        assert good(status, text), text
        sent += 1
    client.close()
    return sent


def _bare(args: tuple[str, int, float]) -> tuple[int, float, float]:
    db_url, worker, seconds = args
    bodies = [json.dumps(e) for e in events(worker, 40_000)]
    dsn = sa.make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)
    done = 0
    with psycopg.connect(dsn, autocommit=True) as connection:
        deadline = _ready(seconds)
        for body in bodies:
            if time.monotonic() > deadline:
                break
            connection.execute("INSERT INTO bare_events (payload) VALUES (%s::jsonb)", (body,))
            done += 1
        backend = connection.execute("SELECT pg_backend_pid()").fetchone()
    return done, time.process_time() - _cpu_at_start, _cpu_seconds([backend[0]] if backend else [])


_barrier: Any = None


def _init(barrier: Any) -> None:
    global _barrier  # noqa: PLW0603 - one per worker process
    _barrier = barrier


def _ready(seconds: float) -> float:
    """Wait until every client has its bodies ready, then start the clock: the deadline. The
    client's CPU time so far is subtracted from what it reports (``_cpu_at_start``)."""
    global _cpu_at_start  # noqa: PLW0603 - one per worker process
    _cpu_at_start = time.process_time()
    _barrier.wait(timeout=600)
    return time.monotonic() + seconds


_cpu_at_start = 0.0


def _stat(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []  # gone


def _cpu_seconds(pids: list[int]) -> float:
    return sum(process_cpu_seconds(pid) or 0.0 for pid in pids)  # a process gone counts 0


def _niced(pid: int) -> bool:
    """Whether the process runs at a positive niceness: the server's projectors do, its HTTP
    processes do not."""
    fields = _stat(pid)
    return bool(fields) and int(fields[16]) > 0


def _tree(pid: int) -> list[int]:
    """The process and all its descendants (server workers, projectors)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            queue += [int(child) for child in task.read_text().split()]
    return found


class Cpu:
    """CPU seconds used by the server's HTTP processes, by its projectors, and by this database's
    PostgreSQL backends."""

    def __init__(self, db_url: str, server_pid: int | None) -> None:
        dsn = sa.make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)
        self._connection = psycopg.connect(dsn, autocommit=True)
        self._server = server_pid

    def sample(self) -> tuple[float, float, float]:
        rows = self._connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
        tree = _tree(self._server) if self._server else []
        projectors = [pid for pid in tree if _niced(pid)]
        http = [pid for pid in tree if pid not in projectors]
        return _cpu_seconds(http), _cpu_seconds(projectors), _cpu_seconds([r[0] for r in rows])


def _load(function: Any, args: list[tuple[Any, ...]], cpu: Cpu) -> dict[str, float]:
    """Events sent, when the load started and ended, and the CPU seconds that clients, server and
    PostgreSQL used meanwhile. The clock starts once every client has built its request bodies
    (the barrier), so that building them is not counted."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(args) + 1)
    with context.Pool(len(args), initializer=_init, initargs=(barrier,)) as pool:
        pending = pool.map_async(function, args)
        barrier.wait(timeout=600)
        started = time.monotonic()
        server0, projector0, pg0 = cpu.sample()
        results = pending.get(timeout=1200)
        ended = time.monotonic()
        server1, projector1, pg1 = cpu.sample()
    del barrier
    return {
        "events": sum(r[0] for r in results),
        "started": started,
        "ended": ended,
        "clients_cpu": sum(r[1] for r in results),
        "server_cpu": server1 - server0,
        "projector_cpu": projector1 - projector0,
        # Backends of the bare clients end with them: those report their own CPU.
        "pg_cpu": pg1 - pg0 + sum(r[2] for r in results),
    }


def _cpu_line(load: dict[str, float]) -> str:
    per = 1000 / load["events"]
    return (
        f"CPU per event during the load: clients {load['clients_cpu'] * per:.2f} ms, "
        f"server {load['server_cpu'] * per:.2f} ms, projector {load['projector_cpu'] * per:.2f} ms, "
        f"PostgreSQL (all backends) {load['pg_cpu'] * per:.2f} ms"
    )


def _pending(url: str) -> dict[str, Any]:
    found: dict[str, Any] = requests.get(f"{url}/api/v1/lineage/status", timeout=60).json()
    return found


def _drain_time(url: str, started: float, limit: float) -> tuple[float, int]:
    """Seconds from ``started`` until the backlog is 0 (polled), and the backlog right after the load."""
    backlog = _pending(url)["pending"]
    while _pending(url)["pending"]:
        if time.monotonic() - started > limit:
            raise SystemExit(f"the backlog did not drain within {limit:.0f} s")
        time.sleep(0.05)
    return time.monotonic() - started, backlog


def _api_phase(
    label: str, function: Any, url: str, args: list[tuple[Any, ...]], cpu: Cpu
) -> dict[str, float]:
    load = _load(function, args, cpu)
    total, started, ended = load["events"], load["started"], load["ended"]
    _, projector0, _ = cpu.sample()
    applied_after, backlog = _drain_time(url, started, limit=1200)
    _, projector1, _ = cpu.sample()
    status = _pending(url)
    assert status["failed"] == 0, status
    result = {
        "events": total,
        "accept_rate": total / (ended - started),
        "backlog": backlog,
        "project_rate": total / applied_after,
    }
    print(
        f"{label}: accepted {total} events in {ended - started:.1f} s = {result['accept_rate']:.0f}/s; "
        f"backlog at the end {backlog}; all applied {applied_after:.1f} s after the start "
        f"= {result['project_rate']:.0f} events/s projected",
        flush=True,
    )
    print(f"  {_cpu_line(load)}", flush=True)
    if backlog:
        drained = backlog / (applied_after - (ended - started))
        print(
            f"  after the load: {drained:.0f} events/s projected, "
            f"{(projector1 - projector0) * 1000 / backlog:.2f} ms of projector CPU per event",
            flush=True,
        )
    return result


def _bare_phase(db_url: str, seconds: float, label: str) -> float:
    load = _load(_bare, [(db_url, w, seconds) for w in range(CLIENTS)], Cpu(db_url, None))
    rate = load["events"] / (load["ended"] - load["started"])
    print(f"{label}bare INSERT, {CLIENTS} connections: {load['events']} rows = {rate:.0f}/s", flush=True)
    print(f"  {_cpu_line(load)}", flush=True)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=12.0, help="length of each load phase")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="bare and single phases, one after the other, this many times: each round's ratio "
        "compares two phases a minute apart, so that the machine's drift between them stays small",
    )
    parser.add_argument("--workers", type=int, default=1, help="lotline serve --workers")
    parser.add_argument("--batch-clients", type=int, default=2, help="clients posting batches of 100")
    parser.add_argument(
        "--batch-events",
        type=int,
        default=5000,
        help="events each batch client sends at most (the projector must then drain them all)",
    )
    options = parser.parse_args()
    seconds = options.seconds
    rounds: list[tuple[float, dict[str, float]]] = []
    with fresh_database("ingest") as db_url:
        dsn = sa.make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute("CREATE TABLE bare_events (id bigserial PRIMARY KEY, payload jsonb NOT NULL)")
        with serve(db_url, PORT, workers=options.workers) as (url, pid):
            cpu = Cpu(db_url, pid)
            for number in range(1, options.rounds + 1):
                # The server is idle here: the previous single phase's backlog has been applied.
                label = f"round {number}: "
                bare = _bare_phase(db_url, seconds, label)
                single = _api_phase(
                    f"{label}single POST /lineage, {CLIENTS} clients",
                    _post_singles,
                    url,
                    [(url, w, seconds) for w in range(CLIENTS)],
                    cpu,
                )
                rounds.append((bare, single))
            batch = _api_phase(
                f"POST /lineage/batch ({BATCH}/batch, {options.batch_clients} clients)",
                _post_batches,
                url,
                [(url, w, seconds, options.batch_events) for w in range(options.batch_clients)],
                cpu,
            )
    bare_rate = statistics.median(bare for bare, _ in rounds)
    print(f"\nserver: lotline serve --workers {options.workers}; load phases of {seconds:.0f} s")
    print("| what | events/s (median of rounds) | vs. bare (median) | each round vs. its bare |")
    print("|---|---|---|---|")
    print(f"| bare INSERT, {CLIENTS} connections | {bare_rate:,.0f} | 1.00x | |")
    rates = (("accept_rate", "accepted"), ("project_rate", "projected"))
    for what, label in rates:
        ratios = [single[what] / bare for bare, single in rounds]
        rate = statistics.median(single[what] for _, single in rounds)
        each = ", ".join(f"{ratio:.2f}x" for ratio in ratios)
        median = statistics.median(ratios)
        print(f"| single POST, {CLIENTS} clients: {label} | {rate:,.0f} | {median:.2f}x | {each} |")
    for what, label in rates:
        rate = batch[what]
        print(
            f"| batch POST, {options.batch_clients} clients: {label} | {rate:,.0f} | "
            f"{rate / bare_rate:.2f}x | (one phase, after the rounds) |"
        )


if __name__ == "__main__":
    main()
