"""``lotline cleanup`` as an operator runs it: a separate process over the configured warehouse."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from lotline.domain.manifests import ManifestDraft
from lotline.services import Lineage
from lotline.services.lots import OutputWritten
from lotline.storage.objects import Storage
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


def test_superseded_objects_go_after_the_configured_grace_and_a_bad_grace_changes_nothing(
    backend_url: str, tmp_path: Path
) -> None:
    storage = Storage(str(tmp_path / "warehouse"))
    with Lineage.over(Store(backend_url), storage) as lineage:
        world = LotWorld(lineage, "cli")
        world.job("ingest", output="raw")
        attempts = []
        for _ in range(2):
            claim = world.claim("ingest", "d1")
            assert claim is not None
            location = storage.attempt_uri("cli", "raw", "d1", claim.attempt)
            storage.write_bytes(f"{location}/part-0.txt", b"data\n")
            lineage.lots.complete(
                claim,
                outputs={
                    claim.dataset: OutputWritten(
                        ManifestDraft(location, storage.describe_written(location, format="text"))
                    )
                },
            )
            attempts.append(f"{location}/part-0.txt")
            if len(attempts) == 1:
                lineage.lots.invalidate("cli", "raw", "d1")
        for bad in (["--superseded-grace", "-P1D"], ["--superseded-grace", "7 days"]):
            refused = _cleanup(tmp_path, backend_url, *bad)
            assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
            assert "--superseded-grace" in refused.stderr
        refused = lotline(
            "cleanup",
            cwd=tmp_path,
            db_url=backend_url,
            settings={"LOTLINE_WAREHOUSE": str(tmp_path / "warehouse"), "LOTLINE_SUPERSEDED_GRACE": "soon"},
        )
        assert refused.returncode == 2 and "LOTLINE_SUPERSEDED_GRACE" in refused.stderr
        kept = _cleanup(tmp_path, backend_url, "--json")  # the default grace, P7D: too young
        assert kept.returncode == 0 and json.loads(kept.stdout)["supersededVersionsRemoved"] == []
        assert all(storage.exists(uri) for uri in attempts)

        zero = {"LOTLINE_WAREHOUSE": str(tmp_path / "warehouse"), "LOTLINE_SUPERSEDED_GRACE": "PT0S"}
        dry = lotline("cleanup", "--dry-run", "--json", cwd=tmp_path, db_url=backend_url, settings=zero)
        report = json.loads(dry.stdout)
        assert (report["supersededObjectsDeleted"], report["supersededBytesDeleted"]) == (1, 5)
        assert all(storage.exists(uri) for uri in attempts)
        done = lotline("cleanup", cwd=tmp_path, db_url=backend_url, settings=zero, process=True)
        assert done.returncode == 0 and "deleted 1 objects (5 bytes) of 1 superseded versions" in done.stdout
        assert not storage.exists(attempts[0]) and storage.exists(attempts[1])
        gone = [m for m in lineage.manifests.history("cli", "raw", "d1") if m.objects_removed_at is not None]
        assert [m.attempt for m in gone] == [1]
