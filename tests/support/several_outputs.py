"""The runner's acceptance scenarios with several outputs (``spark/pipelines/multiout.py`` and
``multichecked.py``), written once and run on both modes: on classic Spark by
``spark/test_several_outputs.py`` (the suite's session, or ``lotline run`` on ``local[1]``) and on
Spark Connect by ``spark/test_connect.py`` (this module as a process of its own, or ``lotline run``
on ``sc://``). Each in-process scenario returns what it observed as JSON-ready data with nothing that
names its folder or its time, so the two modes' observations can be compared whole.

    python -m support.several_outputs sc://host:port FOLDER

runs ``checked_outputs`` and ``retried_part`` on Connect, each on a SQLite database and a warehouse
of its own under FOLDER, and writes their observations to ``FOLDER/observed.json``.
"""

from __future__ import annotations

import json
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lotline.domain.checks import published_with_warnings
from lotline.domain.coordination import Status
from lotline.domain.runs import RunState
from lotline.readers import read_arrow
from lotline.services import Lineage, open_lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.polling import wait_until
from support.processes import lotline
from support.spark import PIPELINES, ingest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOT = "20230101PT1H000"
SPLIT = PIPELINES / "multiout.py"
SPLIT_NS = "multiout"
CHECKED = PIPELINES / "multichecked.py"
CHECKED_NS = "multichecked"


def _rows(lineage: Lineage, spark: SparkSession, dataset: str) -> list[list[object]]:
    """The rows of the lot's readable manifest, read by Spark from exactly the objects it lists."""
    manifest = lineage.manifests.readable(CHECKED_NS, dataset, [LOT])[LOT]
    frame = spark.read.parquet(*[o.uri for o in manifest.objects])
    return [list(r) for r in sorted(tuple(r) for r in frame.collect())]


def checked_outputs(lineage: Lineage, spark: SparkSession) -> dict[str, Any]:
    """``pair`` (a ``fail`` check on its second output) and ``sizes`` (a ``drop`` check on each
    output, a ``warn`` check on ``high``) over one lot: the run's errors, what is left of the failed
    lot, the published and quarantined rows, the versions' quality facets and the run's checks."""
    pipeline = load_pipeline(str(CHECKED))
    register(lineage, pipeline)
    ingest(lineage, CHECKED_NS, "numbers", LOT, [["1", "x", "500", "20"]])
    runner = LotRunner(lineage, pipeline, spark)
    summary = run_pipeline(runner, pipeline.select(["pair", "sizes", "sizes__quarantine"]), worker="t")
    storage = lineage.storage
    failed = {}
    for dataset in ("first", "second"):
        [status] = lineage.lots.status(CHECKED_NS, dataset=dataset)
        failed[dataset] = {
            "readable": sorted(lineage.manifests.readable(CHECKED_NS, dataset, [LOT])),
            "status": [status.status.value, status.error],
            "left": list(storage.objects_under(storage.attempt_uri(CHECKED_NS, dataset, LOT, 1))),
        }
    facets: dict[str, Any] = {}
    for dataset in ("low", "high"):
        version = lineage.versions.current_version(CHECKED_NS, dataset, LOT)
        assert version is not None
        facets[dataset] = {k: version.facets[k] for k in ("dataQualityAssertions", "dataQualityMetrics")}
        facets[dataset]["warned"] = published_with_warnings(version.facets)
    [low] = lineage.lots.status(CHECKED_NS, dataset="low")
    quarantine = lineage.catalog.get_job(CHECKED_NS, "sizes__quarantine")
    return {
        "errors": summary.errors,
        "done": {job: summary.tallies[job].done for job in ("sizes", "sizes__quarantine")},
        "failed": failed,
        "rows": {d: _rows(lineage, spark, d) for d in ("low", "high", "low__quarantine", "high__quarantine")},
        "quarantine": {
            "inputs": [d.name for d in quarantine.inputs],
            "outputs": sorted(d.name for d in quarantine.outputs),
        },
        "facets": facets,
        "checks": lineage.runs.get_run(low.run_id).facets["lotline_checks"],
    }


def retried_part(lineage: Lineage, spark: SparkSession) -> dict[str, Any]:
    """``parted`` (child work, two outputs, one part per object of the input) with its second part
    failing once: nothing readable after the failure; the retry runs only that part, and the part
    that succeeded keeps its attempt's objects (the same files, sizes and times)."""
    pipeline = load_pipeline(str(CHECKED))
    register(lineage, pipeline)
    ingest(lineage, CHECKED_NS, "numbers", LOT, [["1", "2"], ["3", "4", "5"]])
    module = sys.modules[pipeline.jobs["parted"].transform.__module__]
    runner = LotRunner(lineage, pipeline, spark)
    parted = pipeline.jobs["parted"]
    module.FAIL_PART = "part=00001"
    try:
        claim = runner.claim("w", parted)
        assert claim is not None
        failed = runner.execute(parted, claim)
    finally:
        module.FAIL_PART = None

    def kept_part() -> dict[str, list[Any]]:
        """Each output's child manifests of the part that succeeded: attempt, state, objects."""
        return {
            dataset: [
                [m.attempt, m.state.value, [(o.uri, o.size, o.modified_at) for o in m.objects]]
                for m in lineage.manifests.history(CHECKED_NS, dataset, LOT)
                if m.part == "part=00000"
            ]
            for dataset in ("evens", "odds")
        }

    before = kept_part()
    observed: dict[str, Any] = {
        "failed": [failed.ok, failed.error],
        "readable": {d: sorted(lineage.manifests.readable(CHECKED_NS, d, [LOT])) for d in ("evens", "odds")},
    }
    lineage.lots.retry_now(CHECKED_NS, "parted")
    claim = runner.claim("w", parted)
    assert claim is not None
    retried = runner.execute(parted, claim)
    parts = lineage.runs.get_run(claim.run_id).facets["lotline_parts"]
    published = {}
    for dataset in ("evens", "odds"):
        manifest = lineage.manifests.readable(CHECKED_NS, dataset, [LOT])[LOT]
        published[dataset] = {
            "rows": manifest.row_count,
            "read": spark.read.parquet(*[o.uri for o in manifest.objects]).count(),
            "places": sorted({o.uri.split("/attempt=")[1].rsplit("/", 1)[0] for o in manifest.objects}),
        }
    return observed | {
        "retry": [claim.attempt, retried.ok],
        "parts": {k: parts[k] for k in ("kept", "ran", "failed")},
        "published": published,
        "kept": {d: [m[:2] for m in manifests if m[2]] for d, manifests in before.items()},
        "kept untouched": kept_part() == before,
    }


def killed_between_writes(backend_url: str, folder: Path, master: str) -> None:
    """A real ``lotline run`` of ``split`` on ``master``, SIGKILLed while it writes its second output
    (``MULTIOUT_KILL``: the UDF that the second write runs kills the process that loaded the
    pipeline): nothing is readable; the next run, once the lease ran out, redoes the lot and
    publishes both outputs from its attempt 2, holding exactly the input's rows."""
    warehouse = folder / "warehouse"
    with Lineage.over(Store(backend_url), Storage(str(warehouse))) as lineage:
        register(lineage, load_pipeline(str(SPLIT)))
        ingest(lineage, SPLIT_NS, "numbers", LOT, [["1", "-2", "3"]])
        settings = {"LOTLINE_WAREHOUSE": str(warehouse), "LOTLINE_SPARK_MASTER": master}
        command = ("run", str(SPLIT), "--job", "split", "--lease", "2")
        killed = lotline(
            *command,
            cwd=folder,
            db_url=backend_url,
            settings={**settings, "MULTIOUT_KILL": "1"},
            timeout=600,
            process=True,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        # Killed while writing the second output, after the first: nothing is readable.
        storage = lineage.storage
        assert list(storage.objects_under(storage.attempt_uri(SPLIT_NS, "kept", LOT, 1))) != []
        for dataset in ("kept", "rejected"):
            assert lineage.manifests.readable(SPLIT_NS, dataset, [LOT]) == {}
            [status] = lineage.lots.status(SPLIT_NS, dataset=dataset)
            assert status.status is Status.RUNNING and status.lease_expires_at is not None
        expires = status.lease_expires_at
        wait_until(lambda: datetime.now(UTC) > expires, timeout=60, what="the killed lease to expire")

        again = lotline(
            *command, cwd=folder, db_url=backend_url, settings=settings, timeout=600, process=True
        )
        assert again.returncode == 0, again.stderr[-2000:]
        for dataset, rows in (("kept", [1, 3]), ("rejected", [-2])):
            manifest = lineage.manifests.readable(SPLIT_NS, dataset, [LOT])[LOT]
            assert manifest.attempt == 2 and all("/attempt=2/" in o.uri for o in manifest.objects)
            assert manifest.row_count == len(rows)
            read = read_arrow(dataset, namespace=SPLIT_NS, lineage=lineage)
            assert sorted(read.column("n").to_pylist()) == rows  # a reader sees attempt 2 only
        runs = sorted(lineage.runs.list_runs(SPLIT_NS, "split").items, key=lambda r: r.created_at)
        assert [r.state for r in runs] == [RunState.FAILED, RunState.COMPLETED]


def main(url: str, folder: str) -> None:
    from lotline.spark.connect import parse_url, start

    spark = start(parse_url(url), "lotline several outputs", {"spark.sql.session.timeZone": "UTC"})
    root = Path(folder)
    observed = {}
    try:
        for scenario in (checked_outputs, retried_part):
            place = root / scenario.__name__
            place.mkdir()
            with open_lineage(
                f"sqlite:///{place / 'lineage.db'}", Storage(str(place / "warehouse"))
            ) as lineage:
                observed[scenario.__name__] = scenario(lineage, spark)
    finally:
        spark.stop()
    (root / "observed.json").write_text(json.dumps(observed, default=str))


if __name__ == "__main__":
    main(*sys.argv[1:])
