"""``lotline project`` as an operator runs it: a separate process that drains the journal and exits."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from lotline.domain.openlineage import run_uuid
from lotline.domain.runs import RunState
from lotline.services import Lineage
from lotline.store.engine import Store
from support.ol import run_history
from support.processes import lotline


def test_project_drains_the_journal_and_exits(backend_url: str, tmp_path: Path) -> None:
    with Lineage.over(Store(backend_url)) as lineage:
        run_id = str(uuid.uuid4())
        journal = run_history("cli", "job", run_id, steps=2)
        lineage.openlineage.accept_batch(journal)

        bounded = lotline(
            "project", "--max-events", "2", "--json", cwd=tmp_path, db_url=backend_url, process=True
        )
        assert bounded.returncode == 0, bounded.stderr
        assert bounded.stderr.splitlines()[0] == f"projecting {len(journal)} pending events"  # progress
        assert json.loads(bounded.stdout) == {
            "applied": 2,
            "failed": 0,
            "pending": len(journal) - 2,
            "failedTotal": 0,
            "lastAppliedId": 2,
        }
        assert lineage.runs.get_run(run_uuid(run_id)).state is RunState.RUNNING

        rest = lotline("project", cwd=tmp_path, db_url=backend_url)
        assert rest.returncode == 0, rest.stderr
        assert (
            rest.stdout.strip() == f"applied {len(journal) - 2} events, 0 failed; 0 pending, 0 failed in all"
        )
        assert lineage.runs.get_run(run_uuid(run_id)).state is RunState.COMPLETED


def test_project_against_an_unreachable_database_says_so_in_one_line(tmp_path: Path) -> None:
    done = lotline("project", cwd=tmp_path, db_url="postgresql://nobody@127.0.0.1:1/none")
    assert done.returncode == 2
    assert done.stderr.startswith("lotline: error:") and len(done.stderr.strip().splitlines()) == 1
