"""``lotline cleanup`` as an operator runs it: a separate process over the configured warehouse."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from lotline.lots.storage import Storage
from lotline.services import Lineage
from lotline.store.engine import Store
from support.lots import LotWorld
from support.processes import lotline


def _cleanup(tmp_path: Path, db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    warehouse = {"LOTLINE_WAREHOUSE": str(tmp_path / "warehouse")}
    return lotline("cleanup", *args, cwd=tmp_path, db_url=db_url, settings=warehouse)


def test_cleanup_deletes_an_old_unlisted_object_and_rewrites_a_missing_copy(
    backend_url: str, tmp_path: Path
) -> None:
    with Lineage.over(Store(backend_url), Storage(str(tmp_path / "warehouse"))) as lineage:
        world = LotWorld(lineage, "cli")
        world.job("ingest", output="raw")
        world.produce("ingest", "d1")  # published without a manifest: nothing to list or copy
        stray = tmp_path / "warehouse" / "cli" / "raw" / "lot=d2" / "attempt=1" / "part-0.txt"
        stray.parent.mkdir(parents=True)
        stray.write_text("left by a dead worker\n")
        os.utime(stray, (0, 0))  # written long ago
        dry = _cleanup(tmp_path, backend_url, "--grace", "0", "--dry-run", "--json")
        assert dry.returncode == 0, dry.stderr
        assert json.loads(dry.stdout)["unlistedObjectsDeleted"] == 1 and stray.exists()
        done = _cleanup(tmp_path, backend_url, "--grace", "0")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("deleted 1 unlisted objects") and not stray.exists()
