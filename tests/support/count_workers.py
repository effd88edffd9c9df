"""Processes that race on ``ready_lot_counts`` (``support.processes.separate_processes``): writers
that change lots' READY rows through lotline's paths, and compactors that merge the counts' deltas.

Each opens its own store, as another machine would, and writes what it did to ``out/NAME.json``.
An error other than a refusal of the lot's state (a deadlock above all) ends the process with it.
"""

from __future__ import annotations

import contextlib
import json
import random
import uuid
from datetime import timedelta
from pathlib import Path

from lotline.domain.clock import ManualClock
from lotline.domain.errors import Conflict, InvalidInput, NotFound
from lotline.services import Lineage
from lotline.store.engine import Store
from lotline.store.queries import gaps

REFUSED = (Conflict, InvalidInput, NotFound)
#: A compactor left alone (its test gone) stops by itself.
MAX_ROUNDS = 100_000


def write(url: str, namespace: str, lots: list[str], seed: int, steps: int, out: str) -> None:
    """``steps`` random writes: claims through both claim paths (the PostgreSQL functions, and the
    Python path of a lineage with its own clock), completions, failures, invalidations (one lot
    and several at once), and reaps of a lease run out."""
    pick = random.Random(seed)
    clock = ManualClock()
    store = Store(url)
    lineage = Lineage.over(store)
    timed = Lineage.over(store, clock=clock)
    done = 0
    try:
        for _ in range(steps):
            job, dataset = pick.choice([("land", "raw"), ("clean", "cleaned")])
            lot = pick.choice(lots)
            kind = pick.choice(["complete", "complete", "complete", "python", "fail", "invalidate", "many"])
            with contextlib.suppress(*REFUSED):
                if kind in ("complete", "fail"):
                    claim = lineage.lots.claim(f"w{seed}", namespace, job, lot=lot)
                    if claim is not None and kind == "complete":
                        lineage.lots.complete(claim)
                    elif claim is not None:
                        lineage.lots.fail(claim, error="ValueError: bad line")
                elif kind == "python":  # complete or let the lease run out and reap
                    claim = timed.lots.claim(f"p{seed}", namespace, job, lot=lot, lease=timedelta(seconds=1))
                    if claim is not None and pick.random() < 0.7:
                        timed.lots.complete(claim)
                    elif claim is not None:
                        clock.advance(timedelta(seconds=5))
                        timed.lots.reap()
                elif kind == "invalidate":
                    lineage.lots.invalidate(namespace, dataset, lot)
                else:
                    lineage.lots.invalidate_many(namespace, dataset, pick.sample(lots, 3))
                done += 1
    finally:
        lineage.close()
    Path(out, f"writer{seed}.json").write_text(json.dumps({"done": done}))


def compact(url: str, dataset_ids: list[str], key_from: str, key_to: str, name: str, out: str) -> None:
    """Compactions of every dataset's keys ``[key_from, key_to]``, one transaction each, over and
    over until ``out/stop`` appears: the rows merged after the first round (which says so with
    ``out/NAME.ready``), i.e. while or after the writers wrote."""
    store = Store(url)
    folder = Path(out)
    merged, rounds = 0, 0
    try:
        while not (folder / "stop").exists() and rounds < MAX_ROUNDS:
            for dataset_id in dataset_ids:
                with store.write() as connection:
                    found = gaps.compact_ready_counts(connection, uuid.UUID(dataset_id), key_from, key_to)
                merged += found if rounds else 0
            if not rounds:
                (folder / f"{name}.ready").touch()
            rounds += 1
    finally:
        store.dispose()
    (folder / f"{name}.json").write_text(json.dumps({"merged": merged, "rounds": rounds}))
