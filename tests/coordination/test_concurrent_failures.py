"""Workers failing overlapping lots at once never deadlock (issue 39.19): separate processes claim
and fail the same few lots over and over, among the other writes of those lots' work-list rows
(``support/failing_workers.py``). Before the fix, PostgreSQL found one or more deadlocks in every
run; a database error of any kind fails the test."""

from __future__ import annotations

import json
from pathlib import Path

from lotline.services import Lineage
from lotline.store.engine import Store
from support import failing_workers
from support.lots import LotWorld
from support.processes import separate_processes

LOTS = [f"20230101PT1H{hour:03d}" for hour in range(6)]
WORKERS = 6
STEPS = 150


def test_workers_failing_overlapping_lots_in_separate_processes_never_deadlock(
    backend_url: str, tmp_path: Path
) -> None:
    with Lineage.over(Store(backend_url)) as lineage:
        world = LotWorld(lineage)
        world.job("land", output="raw")
        world.job("clean", output="cleaned", inputs=["raw"])
        world.produce("land", *LOTS)
        for lot in LOTS:  # each lot's rows exist: see docs/coordination.md on a lot's first claim
            claim = world.claim("clean", lot)
            assert claim is not None
            world.lots.fail(claim, error="ValueError: bad line")
    forked = separate_processes()
    workers = [
        forked.Process(
            target=failing_workers.fail_lots,
            args=(backend_url, world.ns, LOTS, seed, STEPS, str(tmp_path)),
        )
        for seed in range(WORKERS)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join(900)
    assert [p.exitcode for p in workers] == [0] * WORKERS
    found = [json.loads((tmp_path / f"worker{n}.json").read_text()) for n in range(WORKERS)]
    assert [(f["db_errors"], f["errors"]) for f in found] == [(0, [])] * WORKERS
    assert sum(f["failed"] for f in found) > WORKERS * STEPS // 10  # the lots did fail, many times
