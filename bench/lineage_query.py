"""``GET /lineage`` latency on PostgreSQL over 10,000 jobs and 20,000 datasets (``--jobs 100000``:
100,000 jobs and 200,000 datasets).

    .venv/bin/python -m bench.lineage_query [--jobs 10000] [--requests 50]

Seeds chains of 20 jobs (job k reads the chain's dataset k and writes dataset k+1 plus a side
output; ``--jobs / 20`` chains), where every chain's first job also reads one of 10 shared hub
datasets (fan-out): by default straight into the projected tables, set-based (``_lineage_seed``);
``--seed projector`` sends the events through the OpenLineage service instead (accepted in batches,
then projected: the real write path, ~27 jobs/s, too slow for 100,000 jobs). ``--check`` seeds
``--jobs`` both ways and compares every depth's answers, to show the two give the same graph.
Then measures depth 1, 3 and 20 from the middle of
random chains through ``lotline serve`` in its own process; the same-run baseline is ``GET`` of one
dataset (``/api/v1/namespaces/bench/datasets/{name}``: one indexed read through the same server).
Target (issues 19, 31): depth 3 p95 < 100 ms at 10,000 jobs, < 50 ms at 100,000 jobs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import time

import requests

from bench._lineage_seed import HUBS, LENGTH, seed_tables
from bench._server import free_port, fresh_database, serve
from bench.gaps import machine
from lotline.domain.graph import GraphNode
from lotline.services import open_lineage

#: Events accepted per batch while seeding, and projected per drain.
SEED_BATCH = 2000
TARGET_P95_MS = {10_000: 100.0, 100_000: 50.0}


def ref(name: str) -> dict[str, str]:
    return {"namespace": "bench", "name": name}


def _chain(c: int) -> list[dict[str, object]]:
    events = []
    for k in range(LENGTH):
        inputs = [ref(f"c{c}/d{k}")] + ([ref(f"hub{c % HUBS}")] if k == 0 else [])
        outputs = [ref(f"c{c}/d{k + 1}")] + ([ref(f"c{c}/side{k}")] if k < LENGTH - 1 else [])
        events.append(
            {
                "eventTime": "2026-01-01T00:00:00Z",
                "job": {"namespace": "bench", "name": f"c{c}/job{k}"},
                "inputs": inputs,
                "outputs": outputs,
            }
        )
    return events


def seed(db_url: str, chains: int) -> None:
    with open_lineage(db_url) as lineage:
        pending: list[dict[str, object]] = []
        for c in range(chains):
            pending += _chain(c)
            if len(pending) >= SEED_BATCH or c == chains - 1:
                lineage.openlineage.accept_batch(pending)
                lineage.projection.drain()
                pending = []


def answers(db_url: str, chains: int) -> list[list[tuple[object, ...]]]:
    """Every depth's lineage of a middle dataset and of the first job of each chain, as names and
    edges only (the ids and times differ between two seedings)."""

    def shown(node: GraphNode) -> tuple[object, ...]:
        data = node.data
        io = (data.inputs, data.outputs) if hasattr(data, "inputs") else (data.type, data.physical_name)
        return (str(node.key), io, sorted(map(str, node.in_edges)), sorted(map(str, node.out_edges)))

    with open_lineage(db_url) as lineage:
        starts = [f"dataset:bench:c{c}/d{LENGTH // 2}" for c in range(chains)]
        starts += [f"job:bench:c{c}/job0" for c in range(chains)] + ["dataset:bench:hub0"]
        return [
            sorted(shown(node) for node in lineage.graph.lineage(start, depth))
            for start in starts
            for depth in (0, 1, 3, 20)
        ]


def check(chains: int) -> None:
    """Seed ``chains`` chains through the projector and set-based; the same answers, or exit 1."""
    found = []
    for seeder in (seed, seed_tables):
        with fresh_database("lineage") as db_url:
            seeder(db_url, chains)
            found.append(answers(db_url, chains))
    same = found[0] == found[1]
    print(f"check, {chains} chains: {len(found[0])} answers, seeded set-based = projected: {same}")
    if not same:
        raise SystemExit(1)


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    latencies = sorted(latencies)
    return statistics.median(latencies), latencies[int(0.95 * (len(latencies) - 1))]


def measure(url: str, chains: int, depth: int, count: int) -> tuple[float, float, int]:
    latencies, sizes = [], []
    rng = random.Random(depth)
    with requests.Session() as session:
        for _ in range(count):
            node = f"dataset:bench:c{rng.randrange(chains)}/d{LENGTH // 2}"
            started = time.perf_counter()
            params: dict[str, str | int] = {"nodeId": node, "depth": depth}
            answer = session.get(f"{url}/api/v1/lineage", params=params, timeout=300)
            latencies.append((time.perf_counter() - started) * 1000)
            if answer.status_code != 200:
                raise RuntimeError(f"GET /lineage answered {answer.status_code}")
            sizes.append(len(answer.json()["graph"]))
    p50, p95 = _percentiles(latencies)
    return p50, p95, int(statistics.median(sizes))


def baseline(url: str, chains: int, count: int) -> tuple[float, float]:
    """One dataset's GET through the same server: what any read costs beside the walk."""
    latencies = []
    rng = random.Random(0)
    with requests.Session() as session:
        for _ in range(count):
            name = f"c{rng.randrange(chains)}/d{LENGTH // 2}".replace("/", "%2F")
            started = time.perf_counter()
            answer = session.get(f"{url}/api/v1/namespaces/bench/datasets/{name}", timeout=60)
            latencies.append((time.perf_counter() - started) * 1000)
            if answer.status_code != 200:
                raise RuntimeError(f"GET dataset answered {answer.status_code}")
    return _percentiles(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs (default 10000; 100000: 10x)")
    parser.add_argument("--requests", type=int, default=50, help="requests per depth (default 50)")
    parser.add_argument("--seed", choices=("tables", "projector"), default="tables", help="default tables")
    parser.add_argument("--check", action="store_true", help="compare the two seedings' answers, then stop")
    args = parser.parse_args()
    chains = args.jobs // LENGTH
    if args.check:
        check(chains)
        return
    now = dt.datetime.now(dt.UTC)
    print(f"lineage query bench, {chains * LENGTH} jobs, {now:%Y-%m-%d %H:%M} UTC, {machine()}", flush=True)
    with fresh_database("lineage") as db_url:
        started = time.monotonic()
        (seed_tables if args.seed == "tables" else seed)(db_url, chains)
        print(
            f"seeded {chains * LENGTH} jobs ({args.seed}) in {time.monotonic() - started:.0f} s; {machine()}",
            flush=True,
        )
        with serve(db_url, free_port()) as (url, _):
            base50, base95 = baseline(url, chains, args.requests)
            print(f"baseline GET one dataset: p50 {base50:.1f} ms, p95 {base95:.1f} ms", flush=True)
            target = TARGET_P95_MS.get(chains * LENGTH)
            for depth in (1, 3, 20):
                p50, p95, nodes = measure(url, chains, depth, args.requests)
                verdict = ""
                if depth == 3 and target is not None:
                    verdict = f"; target p95 < {target:.0f} ms {'met' if p95 < target else 'MISSED'}"
                print(
                    f"depth {depth:2d}: p50 {p50:.1f} ms, p95 {p95:.1f} ms, {nodes} nodes; "
                    f"ratio to the baseline p50 {p50 / base50:.2f}x, p95 {p95 / base95:.2f}x{verdict}; "
                    f"{machine()}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
