"""Pipelines of the runner tests, and a stand-in for ``lotline ingest``: raw lots written to storage
and published with their manifest, as a source job would."""

from __future__ import annotations

from pathlib import Path

from lotline.domain.manifests import ManifestDraft
from lotline.services import Lineage

PIPELINES = Path(__file__).parent.parent / "spark" / "pipelines"


def ingest(lineage: Lineage, namespace: str, dataset: str, lot: str, files: list[list[str]]) -> None:
    """Publish ``lot`` of ``dataset`` as a source job would: one text file per entry of ``files``
    (no files: an empty lot), written to the attempt's fresh location, listed in its manifest."""
    ingest_files(lineage, namespace, dataset, lot, {f"part-{i}.txt": lines for i, lines in enumerate(files)})


def ingest_files(
    lineage: Lineage, namespace: str, dataset: str, lot: str, files: dict[str, list[str]]
) -> None:
    """``ingest`` with the files' paths under the attempt given: ``region=eu/a.txt`` gives its object
    the partition value ``region=eu``."""
    job = f"ingest_{dataset}"
    lineage.lots.register_job(namespace, job, output=dataset)
    claim = lineage.lots.claim("ingest", namespace, job, lot=lot)
    assert claim is not None
    storage = lineage.storage
    location = storage.attempt_uri(namespace, dataset, lot, claim.attempt)
    for path, lines in files.items():
        storage.write_bytes(f"{location}/{path}", "".join(f"{line}\n" for line in lines).encode())
    objects = storage.describe_written(location, format="text")
    rows = sum(len(lines) for lines in files.values())
    lineage.lots.complete(claim, manifest=ManifestDraft(location, objects, rows))
