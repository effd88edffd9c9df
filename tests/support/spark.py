"""Pipelines of the runner tests, and a stand-in for ``lotline ingest``: raw lots written to storage
and published with their manifest, as a source job would."""

from __future__ import annotations

from pathlib import Path

from lotline.domain.ingress import TimeRule
from lotline.domain.lots import Interval
from lotline.domain.manifests import ManifestDraft
from lotline.services import Lineage
from lotline.services.ingest import IngestRequest
from lotline.services.lots import OutputWritten
from lotline.spark.pipeline import Pipeline, load_pipeline
from lotline.store.types import utcnow

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
    lineage.lots.complete(
        claim, outputs={claim.dataset: OutputWritten(ManifestDraft(location, objects, rows))}
    )


HALF = ["20230101PT30M000", "20230101PT30M001", "20230101PT30M002"]
LANDED = {
    "20230101T0001.log": "2023-01-01T00:01:00 /a 200",
    "20230101T0031.log": "2023-01-01T00:31:00 /b 599",  # fails the first attempt of lot 001
    "20230101T0101.log": "2023-01-01T01:01:00 /a 200",
}
BY_PATH = TimeRule.parse(r"path:(?P<year>\d{4})(?P<month>\d\d)(?P<day>\d\d)T(?P<hour>\d\d)(?P<minute>\d\d)")


def weblogs(namespace: str) -> Pipeline:
    pipeline = load_pipeline(str(PIPELINES / "weblogs.py"))
    pipeline.namespace = namespace
    return pipeline


def land_and_ingest(lineage: Lineage, namespace: str, landing: Path) -> None:
    """The raw lots through ``lotline ingest``'s service: each lot a run of ``ingest:raw_logs``."""
    landing.mkdir(parents=True, exist_ok=True)
    for name, line in LANDED.items():
        (landing / name).write_text(line + "\n")
    request = IngestRequest(namespace, "raw_logs", str(landing), Interval.parse("PT30M"), time_rule=BY_PATH)
    report = lineage.ingest.ingest(request, now=utcnow())
    assert sorted(report.registered) == HALF
