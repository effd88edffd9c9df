"""Issue 29.2: ``lotline worker``, ``lotline events --follow`` and ``lotline webhooks`` live through a
PostgreSQL outage — a throwaway server of the test's own (``support.pg_cluster``) stopped under them
and started again. Each says once that the database went away and once that it is back, listens
anew, and goes on: a lot published after the outage is run, printed and delivered; SIGTERM then
ends each with exit code 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from lotline.domain.coordination import Status
from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from lots.test_webhooks import Receiver
from spark.test_processes import SPARK_CONF
from support.pg_cluster import ThrowawayPostgres
from support.polling import wait_until
from support.spark import PIPELINES, ingest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
HALF = ["20230101PT30M000", "20230101PT30M001"]
DEADLINE_S = 300


class _Command:
    """A ``lotline`` process whose output goes to files the test reads while it runs."""

    def __init__(self, tmp_path: Path, name: str, env: dict[str, str], *args: str) -> None:
        self.out, self.err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "lotline", *args], cwd=tmp_path, env=env, stdout=out, stderr=err
            )

    def stdout(self) -> str:
        return self.out.read_text()

    def stderr(self) -> str:
        return self.err.read_text()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=120)
        finally:
            if self.process.poll() is None:
                self.process.kill()


def _says(command: _Command, text: str) -> Callable[[], bool]:
    """Whether the command said ``text`` — or ended (checked after the wait)."""
    return lambda: text in command.stderr() or command.process.poll() is not None


def test_worker_events_and_webhooks_wait_out_a_database_restart(
    own_postgres: ThrowawayPostgres, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    receiver = Receiver()
    lineage = Lineage.over(Store(own_postgres.url), Storage(str(warehouse)))
    register(lineage, load_pipeline(str(PIPELINES / "weblogs.py")))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")},
        "LOTLINE_DB_URL": own_postgres.url,
        "LOTLINE_WAREHOUSE": str(warehouse),
        "LOTLINE_SPARK_MASTER": "local[1]",
        "LOTLINE_SPARK_CONF": SPARK_CONF,
        "LOTLINE_WEBHOOK_URLS": receiver.url,
    }
    commands = {
        "worker": _Command(tmp_path, "worker", env, "worker", str(PIPELINES / "weblogs.py"), "--poll", "0.5"),
        "events": _Command(tmp_path, "events", env, "events", "--follow", "--json", "-n", "weblogs"),
        "webhooks": _Command(tmp_path, "webhooks", env, "webhooks", "--poll", "0.2"),
    }
    try:
        wait_until(
            lambda: "lotline worker" in commands["worker"].stdout(),
            timeout=DEADLINE_S,
            what="the worker to start",
        )
        with lineage.store.read() as connection:  # the webhook's position starts at the end of the log
            count = "SELECT count(*) FROM webhook_deliveries"
            wait_until(
                lambda: connection.exec_driver_sql(count).scalar_one() == 1,
                timeout=DEADLINE_S,
                what="the webhooks' first look",
            )
        ingest(lineage, "weblogs", "raw_logs", HALF[0], [["2023-01-01T00:01:00 /a 200"]])
        wait_until(
            lambda: lineage.lots.counts("weblogs", "parse") == {Status.READY: 1},
            timeout=DEADLINE_S,
            what="the first lot",
        )
        lineage.store.dispose()

        own_postgres.stop()
        for name, command in commands.items():
            wait_until(_says(command, "database unavailable ("), timeout=DEADLINE_S, what=f"{name} to notice")
            assert command.process.poll() is None, (name, command.stderr()[-3000:])
        own_postgres.resume()
        for name, command in commands.items():
            wait_until(
                _says(command, "database available again"), timeout=DEADLINE_S, what=f"{name} to resume"
            )
            assert command.process.poll() is None, (name, command.stderr()[-3000:])

        ingest(lineage, "weblogs", "raw_logs", HALF[1], [["2023-01-01T00:31:00 /b 200"]])
        wait_until(
            lambda: lineage.lots.counts("weblogs", "hourly_counts") == {Status.READY: 1},
            timeout=DEADLINE_S,
            what="the hour",
        )
        wait_until(
            lambda: "20230101PT1H000" in commands["events"].stdout(),
            timeout=DEADLINE_S,
            what="the follower to print the hour",
        )
        wait_until(
            lambda: "20230101PT1H000" in json.dumps(receiver.bodies), timeout=DEADLINE_S, what="the webhook"
        )
    finally:
        if not (own_postgres.data / "postmaster.pid").exists():
            own_postgres.resume()  # a failure while it was down: the fixture stops it
        codes = {name: command.stop() for name, command in commands.items()}
        receiver.server.shutdown()
        lineage.close()
    for name, command in commands.items():
        assert codes[name] == 0, (name, command.stderr()[-3000:])
        lines = command.stderr().splitlines()
        assert sum("database unavailable (" in line for line in lines) == 1, (name, lines[-40:])
        assert sum("database available again" in line for line in lines) == 1, (name, lines[-40:])
    printed = [json.loads(line) for line in commands["events"].stdout().splitlines()]
    assert {e["lot"] for e in printed} >= {HALF[0], HALF[1], "20230101PT1H000"}
