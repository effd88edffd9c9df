"""Ctrl-C during ``lotline run``: the lot in progress fails as ``interrupted by the user`` (recorded
so, not as an empty ``KeyboardInterrupt: ``), one line per interrupted lot, the run's summary, exit
code 130, and no traceback (nor Spark's log below ERROR, the default); the next run redoes the lot.
The whole process group gets SIGINT, as from a terminal. The scenario is ``support.waiting``'s,
which ``test_connect.py`` runs on Spark Connect."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.waiting import interrupted_and_redone

pytestmark = pytest.mark.slow  # Spark in processes of their own


# What Ctrl-C does is the runner's and the process's; failing a lot and redoing it on each database
# is the contract suite's and the retry tests'. Once, on SQLite: two JVMs per backend otherwise.
@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_ctrl_c_fails_the_lot_in_progress_in_one_line_and_exits_130(backend_url: str, tmp_path: Path) -> None:
    interrupted_and_redone(backend_url, tmp_path, "local[1]")
