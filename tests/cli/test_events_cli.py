"""``lotline events`` as a separate process: the log once, and followed while lots are published."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
from pathlib import Path

from lotline.services import Lineage
from lotline.store.engine import Store
from support.lots import LotWorld
from support.processes import lotline


def _read_line(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    assert ready, "no event printed in time"
    return process.stdout.readline()


def test_follow_prints_events_as_lots_are_published(backend_url: str, tmp_path: Path) -> None:
    lineage = Lineage.over(Store(backend_url))
    world = LotWorld(lineage, "ev")
    world.job("ingest", output="raw")
    world.produce("ingest", "d1")
    elsewhere = LotWorld(lineage, "other")
    elsewhere.job("ingest", output="raw")
    elsewhere.produce("ingest", "o1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")}
    env["LOTLINE_DB_URL"] = backend_url
    follower = subprocess.Popen(
        [sys.executable, "-m", "lotline", "events", "--follow", "--json", "-n", "ev", "-d", "raw"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = json.loads(_read_line(follower, 30))
        assert (first["kind"], first["lot"]) == ("READY", "d1")
        world.produce("ingest", "d2")
        second = json.loads(_read_line(follower, 30))
        assert (second["lot"], second["position"] > first["position"]) == ("d2", True)
        follower.send_signal(signal.SIGTERM)
        assert follower.wait(timeout=15) == 0
    finally:
        if follower.poll() is None:
            follower.kill()
        lineage.close()

    once = lotline("events", cwd=tmp_path, db_url=backend_url)
    assert once.returncode == 0, once.stderr
    assert [line.split()[-1] for line in once.stdout.splitlines()] == ["d1", "o1", "d2"]
    # Times as every page and `lotline gaps` show them (UTC).
    for line in once.stdout.splitlines():
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", " ".join(line.split()[1:3])), line
    # Issue 29.12: -n alone keeps one namespace's events.
    ev = lotline("events", "-n", "ev", cwd=tmp_path, db_url=backend_url)
    assert ev.returncode == 0, ev.stderr
    assert [line.split()[-1] for line in ev.stdout.splitlines()] == ["d1", "d2"]
    bad = lotline("events", "-d", "raw", cwd=tmp_path, db_url=backend_url)
    assert bad.returncode == 2 and "2 namespaces exist (ev, other)" in bad.stderr, bad.stderr


def test_a_failed_lot_is_printed_with_its_job_attempt_and_reason(backend_url: str, tmp_path: Path) -> None:
    with Lineage.over(Store(backend_url)) as lineage:
        world = LotWorld(lineage, "ev")
        world.job("ingest", output="raw")
        claim = world.claim("ingest", "d1")
        assert claim is not None
        lineage.lots.fail(claim, error="[MALFORMED_RECORD_IN_PARSING] bad.csv")
    once = lotline("events", cwd=tmp_path, db_url=backend_url)
    assert once.returncode == 0, once.stderr
    [line] = once.stdout.splitlines()
    assert "FAILED" in line and line.endswith(
        "ev:raw  d1  job ingest attempt 1: [MALFORMED_RECORD_IN_PARSING] bad.csv"
    )
    shown = lotline("events", "--json", cwd=tmp_path, db_url=backend_url)
    event = json.loads(shown.stdout)
    assert (event["kind"], event["job"], event["attempt"]) == ("FAILED", "ingest", 1)
