"""``GET /lineage`` latency on PostgreSQL over 10,000 jobs and 20,000 datasets.

Seeds 500 chains of 20 jobs (job k reads the chain's dataset k and writes dataset k+1 plus a
side output), where every chain's first job also reads one of 10 shared hub datasets (fan-out),
through the OpenLineage service (JobEvents). Then measures depth 1, 3 and 20 from the middle of
random chains. Run: ``.venv/bin/python -m bench.lineage_query [requests-per-depth]``.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

import requests

from bench._server import fresh_database, serve
from lotline.services import open_lineage

CHAINS, LENGTH, HUBS = 500, 20, 10


def ref(name: str) -> dict[str, str]:
    return {"namespace": "bench", "name": name}


def seed(db_url: str) -> None:
    lineage = open_lineage(db_url)
    try:
        for c in range(CHAINS):
            chain = []
            for k in range(LENGTH):
                inputs = [ref(f"c{c}/d{k}")] + ([ref(f"hub{c % HUBS}")] if k == 0 else [])
                outputs = [ref(f"c{c}/d{k + 1}")] + ([ref(f"c{c}/side{k}")] if k < LENGTH - 1 else [])
                chain.append(
                    {
                        "eventTime": "2026-01-01T00:00:00Z",
                        "job": {"namespace": "bench", "name": f"c{c}/job{k}"},
                        "inputs": inputs,
                        "outputs": outputs,
                    }
                )
            lineage.openlineage.accept_batch(chain)
        lineage.projection.drain()
    finally:
        lineage.close()


def measure(url: str, depth: int, count: int) -> tuple[float, float, int]:
    latencies, sizes = [], []
    rng = random.Random(depth)
    with requests.Session() as session:
        for _ in range(count):
            node = f"dataset:bench:c{rng.randrange(CHAINS)}/d{LENGTH // 2}"
            started = time.perf_counter()
            params: dict[str, str | int] = {"nodeId": node, "depth": depth}
            answer = session.get(f"{url}/api/v1/lineage", params=params, timeout=120)
            latencies.append((time.perf_counter() - started) * 1000)
            assert answer.status_code == 200
            sizes.append(len(answer.json()["graph"]))
    latencies.sort()
    p95 = latencies[int(0.95 * (len(latencies) - 1))]
    return statistics.median(latencies), p95, int(statistics.median(sizes))


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    with fresh_database("lineage") as db_url:
        started = time.monotonic()
        seed(db_url)
        print(f"seeded {CHAINS * LENGTH} jobs in {time.monotonic() - started:.0f}s")
        with serve(db_url, 5098) as (url, _):
            for depth in (1, 3, 20):
                p50, p95, nodes = measure(url, depth, count)
                print(f"depth {depth:2d}: p50 {p50:.1f} ms, p95 {p95:.1f} ms, {nodes} nodes")


if __name__ == "__main__":
    main()
