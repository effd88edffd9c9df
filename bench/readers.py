"""What a reader outside lotline pays for the list: ``ReadingService.published`` (one read) over a
dataset of N READY PT5M lots, each with a one-object manifest, on SQLite and PostgreSQL.

Run: ``.venv/bin/python -m bench.readers [--lots 2880]``. Prints the best of 5 reads of every lot
and of one day (288 lots); results go to docs/benchmarks.md by hand. Everything is local (a
temporary SQLite file, a fresh PostgreSQL database on 127.0.0.1, dropped afterwards).
"""

from __future__ import annotations

import argparse
import datetime
import tempfile
import time
from pathlib import Path

from bench._server import fresh_database
from lotline.domain.manifests import ManifestDraft, ManifestObject
from lotline.services import Lineage
from lotline.services.lots import OutputWritten
from lotline.storage.objects import Storage
from lotline.store.engine import Store

NS, DATASET, JOB = "bench", "big", "load"
DAY = datetime.date(2023, 1, 1)


def _publish(lineage: Lineage, lots: int) -> None:
    lineage.catalog.upsert_namespace(NS, owner_name="bench")
    lineage.catalog.upsert_dataset(NS, DATASET)
    lineage.lots.register_job(NS, JOB, output=DATASET)
    for index in range(lots):
        lot = f"{DAY + datetime.timedelta(days=index // 288):%Y%m%d}PT5M{index % 288:03d}"
        claim = lineage.lots.claim("bench", NS, JOB, lot=lot)
        if claim is None:
            raise SystemExit(f"lot {lot} could not be claimed")
        location = lineage.storage.attempt_uri(NS, DATASET, lot, claim.attempt)
        found = ManifestObject(
            f"{location}/part-0.parquet", 100, datetime.datetime.now(datetime.UTC), "parquet"
        )
        lineage.lots.complete(
            claim, outputs={claim.dataset: OutputWritten(ManifestDraft(location, (found,), 1))}
        )


def _best_ms(lineage: Lineage, start: str | None, end: str | None) -> tuple[int, float]:
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        found = lineage.reading.published(NS, DATASET, start, end)
        best = min(best, time.perf_counter() - began)
    return len(found.manifests), best * 1000


def measure(label: str, url: str, lots: int, folder: Path) -> None:
    with Lineage.over(Store(url), Storage(str(folder / "warehouse"))) as lineage:
        _publish(lineage, lots)
        for what, start, end in (("every lot", None, None), ("one day", "2023-01-02", "2023-01-03")):
            count, ms = _best_ms(lineage, start, end)
            print(f"{label:<10} {what:<9} {count:>6} lots {ms:8.1f} ms  ({ms * 1000 / count:.0f} us a lot)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lots", type=int, default=2880)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = Store(f"sqlite:///{folder}/bench.db")
        store.upgrade()
        store.dispose()
        measure("sqlite", f"sqlite:///{folder}/bench.db", args.lots, Path(folder) / "sqlite")
        with fresh_database("readers") as url:
            measure("postgresql", url, args.lots, Path(folder) / "pg")


if __name__ == "__main__":
    main()
