"""Concurrent ingests of one landing (issue 29 §9): separate ``lotline ingest`` processes scanning
the same landing at once made extra versions of a lot (11 on PostgreSQL, 5 on SQLite), each with
its downstream recomputation: an ingest that had seen the lot's old digest reopened the version
another ingest had just registered and registered the same files again. One version per actual
change, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lotline.domain.manifests import LotEventKind, ManifestState
from lotline.services import Lineage
from lotline.store.engine import Store

NS, DATASET = "cli", "raw"
PROCESSES = 4
START = datetime(2023, 1, 1, tzinfo=UTC)
LOTS = 72  # six hours of PT5M lots, a file each
PATTERN = r"path:(?P<year>\d{4})(?P<month>\d\d)(?P<day>\d\d)T(?P<hour>\d\d)(?P<minute>\d\d)"


def _land(landing: Path, text: str) -> None:
    for index in range(LOTS):
        at = START + timedelta(minutes=5 * index + 1)
        (landing / f"{at:%Y%m%dT%H%M}.log").write_text(text)


def _ingest_at_once(landing: Path, cwd: Path, db_url: str) -> tuple[list[dict[str, Any]], list[str]]:
    """``PROCESSES`` ingests of the landing started together: their JSON reports, and the errors
    of those that failed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOTLINE_")}
    env["LOTLINE_DB_URL"] = db_url
    end = START + timedelta(minutes=5 * LOTS)
    args = [sys.executable, "-m", "lotline", "ingest", "-n", NS, "-d", DATASET, "--create"]
    args += ["--landing", str(landing)]
    args += ["--interval", "PT5M", "--time", PATTERN, "--from", START.isoformat(), "--to", end.isoformat()]
    started = [
        subprocess.Popen(
            [*args, "--json"], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(PROCESSES)
    ]
    reports, errors = [], []
    for process in started:
        out, err = process.communicate(timeout=600)
        if process.returncode == 0:
            reports.append(json.loads(out))
        else:
            errors.append(err.strip())
    return reports, errors


def _versions(db_url: str) -> tuple[Counter[str], Counter[str]]:
    """Versions registered per lot (each is one complete or empty manifest), and the times each
    lot was reopened (what makes downstream recompute)."""
    lineage = Lineage.over(Store(db_url))
    try:
        counts: Counter[str] = Counter()
        for status in lineage.lots.status(NS, dataset=DATASET):
            history = lineage.manifests.history(NS, DATASET, status.lot)
            published = [m for m in history if m.state in (ManifestState.COMPLETE, ManifestState.EMPTY)]
            counts[status.lot] = len(published)
        reopened: Counter[str] = Counter()
        position = 0
        while page := lineage.lot_events.after(position, namespace=NS, datasets=[DATASET], limit=1000):
            reopened.update(e.lot for e in page if e.kind is LotEventKind.REOPENED)
            position = page[-1].position
        return counts, reopened
    finally:
        lineage.close()


def test_concurrent_ingests_make_one_version_per_change(backend_url: str, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    _land(landing, "first\n")
    first, errors = _ingest_at_once(landing, tmp_path, backend_url)
    assert errors == []
    assert sum(len(r["registered"]) for r in first) == LOTS
    versions, reopened = _versions(backend_url)
    assert len(versions) == LOTS and set(versions.values()) == {1} and not reopened

    _land(landing, "corrected, longer\n")  # every file replaced by its sender
    second, errors = _ingest_at_once(landing, tmp_path, backend_url)
    versions, reopened = _versions(backend_url)
    extra = sum(count - 2 for count in versions.values())
    assert (extra, errors) == (0, []), second
    assert set(versions.values()) == {2} and reopened == Counter(dict.fromkeys(versions, 1))
    # Each new version is reported once: as re-versioned, or as registered by a scan that read the
    # lot while another had it reopened.
    published = [lot for r in second for key in ("reversioned", "registered") for lot in r[key]]
    assert sorted(published) == sorted(versions)
