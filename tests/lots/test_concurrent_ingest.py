"""Concurrent ingests of one landing (issue 29 §9): separate ``lotline ingest`` processes scanning
the same landing at once made extra versions of a lot (11 on PostgreSQL, 5 on SQLite), each with
its downstream recomputation: an ingest that had seen the lot's old digest reopened the version
another ingest had just registered and registered the same files again. One version per actual
change, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lotline.domain.manifests import LotEventKind, ManifestState
from lotline.services import Lineage
from lotline.store.engine import Store
from support.processes import lotlines_at_once

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
    """``PROCESSES`` ingests of the landing started together, each a process of its own: their JSON
    reports, and the errors of those that failed."""
    end = START + timedelta(minutes=5 * LOTS)
    args = ["ingest", "-n", NS, "-d", DATASET, "--create", "--landing", str(landing), "--json"]
    args += ["--interval", "PT5M", "--time", PATTERN, "--from", START.isoformat(), "--to", end.isoformat()]
    reports, errors = [], []
    for done in lotlines_at_once(*args, count=PROCESSES, cwd=cwd, db_url=db_url):
        if done.returncode == 0:
            reports.append(json.loads(done.stdout))
        else:
            errors.append(done.stderr.strip())
    return reports, errors


def _versions(db_url: str) -> tuple[Counter[str], Counter[str]]:
    """Versions registered per lot (each is one complete or empty manifest), and the times each
    lot was reopened (what makes downstream recompute)."""
    with Lineage.over(Store(db_url)) as lineage:
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
