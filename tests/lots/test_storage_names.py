"""Storage names (issue 29 §4): a produced dataset's folder never holds another's, names never use
the layout's reserved segments, and no segment is longer than a file name may be — refused when
the job is registered, on SQLite and PostgreSQL, with nothing changed."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from lotline.domain.errors import Conflict, InvalidName
from lotline.domain.manifests import ManifestDraft
from lotline.domain.storage_names import dataset_prefix, overlapping
from lotline.services import Lineage
from lotline.services.lots import OutputWritten
from lotline.store.engine import Store
from support.lots import LotWorld
from support.processes import lotline

LOT = "20230101PT5M050"


@pytest.mark.parametrize(
    ("namespace", "dataset"),
    [
        ("shop", "y/_manifests/state=complete"),
        ("shop", "raw2/lot=20230101PT5M050/attempt=1/x"),
        ("shop", "raw/attempt=3"),
        ("shop/_manifests", "orders"),
        ("shop/lot=x", "orders"),
        ("shop", "x" * 251),  # its copies' folder name=x… would be 256 bytes
        ("shop", "a/" + "é" * 128),  # 256 bytes
        ("s" * 256, "orders"),
    ],
)
def test_reserved_and_overlong_segments_are_refused(namespace: str, dataset: str) -> None:
    with pytest.raises(InvalidName):
        dataset_prefix(namespace, dataset)


def test_overlap_is_a_folder_holding_another_or_inside_it() -> None:
    prefix = dataset_prefix("shop", "raw/orders")
    assert overlapping(prefix, [("shop", "raw2"), ("shop", "raw/orders2"), ("other", "raw/orders")]) is None
    assert overlapping(prefix, [("shop", "raw")]) == ("shop", "raw")
    assert overlapping(prefix, [("shop", "raw/orders/eu")]) == ("shop", "raw/orders/eu")
    assert overlapping(prefix, [("shop/raw", "orders")]) == ("shop/raw", "orders")
    assert overlapping(dataset_prefix("shop", "raw"), [("shop/raw", "orders")]) == ("shop/raw", "orders")
    assert dataset_prefix("shop", "x" * 250) == ("shop", "x" * 250)


def _registered_jobs(lineage: Lineage) -> set[str]:
    return {j.name for j in lineage.catalog.list_jobs("shop").items}


@pytest.mark.parametrize(
    ("first", "second"),
    [("raw2", "raw2/eu"), ("raw2/eu", "raw2"), ("raw2", "raw2")],
)
def test_an_output_whose_folder_overlaps_another_is_a_conflict_naming_both(
    lineage: Lineage, first: str, second: str
) -> None:
    world = LotWorld(lineage, "shop")
    world.job("make-first", output=first)
    if first == second:  # the same dataset: a second producer, refused as before
        with pytest.raises(Conflict, match="exactly one producing job"):
            world.job("make-second", output=second)
        return
    before = _registered_jobs(lineage)
    with pytest.raises(Conflict) as refused:
        world.job("make-second", output=second)
    assert f"shop:{first}" in str(refused.value) and f"shop:{second}" in str(refused.value)
    assert _registered_jobs(lineage) == before
    world.job("make-third", output="raw3")  # apart: fine
    world.job("make-first", output=first)  # re-registering a job is fine


def test_namespaces_share_the_root(lineage: Lineage) -> None:
    LotWorld(lineage, "shop").job("make", output="raw")
    with pytest.raises(Conflict, match="shop:raw"):
        LotWorld(lineage, "shop/raw").job("make", output="orders")


def test_a_dataset_named_into_the_manifests_folder_cannot_make_cleanup_delete_ready_data(
    lineage: Lineage,
) -> None:
    """Issue 29 §4: a dataset ``y/_manifests/state=complete`` had its READY data deleted by cleanup
    (taken for manifest copies nothing owns); ``raw2/lot=L/attempt=1/x`` showed up in ``raw2``'s
    attempt listing. Both are refused at registration, and ``raw2``'s lot lists its own object only."""
    world = LotWorld(lineage, "shop")
    world.job("make-raw2", output="raw2")
    for bad in ("y/_manifests/state=complete", f"raw2/lot={LOT}/attempt=1/x"):
        with pytest.raises(InvalidName, match="reserves"):
            world.job(f"make-{len(bad)}", output=bad)
    claim = world.claim("make-raw2", LOT)
    assert claim is not None
    location = lineage.storage.attempt_uri("shop", "raw2", LOT, claim.attempt)
    lineage.storage.write_bytes(f"{location}/part-0.txt", b"data\n")
    objects = lineage.storage.describe_written(location, format="text")
    lineage.lots.complete(claim, outputs={claim.dataset: OutputWritten(ManifestDraft(location, objects))})
    report = lineage.cleanup.cleanup(grace=timedelta(0), max_lease=timedelta(seconds=1))
    assert report.unlisted_deleted == 0
    manifest = lineage.manifests.current("shop", "raw2", LOT)
    assert manifest is not None and [o.uri for o in manifest.objects] == [f"{location}/part-0.txt"]
    assert lineage.storage.exists(f"{location}/part-0.txt")


def test_ingest_of_a_refused_name_is_one_line_and_leaves_nothing(backend_url: str, tmp_path: Path) -> None:
    """Issue 29 §4: a 300-byte segment made ``ingest --copy`` die with a traceback and every later
    ``cleanup`` exit 1."""
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "20230101T0411.log").write_text("a\n")
    pattern = r"path:(?P<year>\d{4})(?P<month>\d\d)(?P<day>\d\d)T(?P<hour>\d\d)(?P<minute>\d\d)"
    for dataset, copy in (("d" * 300, ("--copy",)), ("raw/_manifests", ("--copy",)), ("raw/attempt=1", ())):
        args = ("ingest", "--create", "-n", "cli", "-d", dataset, "--landing", str(landing))
        args = (*args, "--interval", "PT5M")
        window = ("--from", "2023-01-01T04:10:00", "--to", "2023-01-01T04:20:00", "--time", pattern)
        done = lotline(*args, *window, *copy, cwd=tmp_path, db_url=backend_url)
        assert done.returncode == 2, (dataset, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("lotline: error:"), done.stderr
    cleanup = lotline("cleanup", "--json", cwd=tmp_path, db_url=backend_url)
    assert cleanup.returncode == 0, cleanup.stderr
    assert json.loads(cleanup.stdout)["unlistedObjectsDeleted"] == 0
    with Lineage.over(Store(backend_url)) as lineage:
        assert lineage.catalog.list_namespaces().items == []


def test_a_pipeline_whose_outputs_overlap_declares_nothing(lineage: Lineage) -> None:
    """``lotline run`` and workers register a pipeline: its names are checked before anything is
    declared, so a refused pipeline leaves no namespace, dataset or job behind."""
    from pyspark.sql import DataFrame

    from lotline.spark.pipeline import Lot, Pipeline
    from lotline.spark.registration import register

    pipeline = Pipeline("shop")
    raw = pipeline.dataset("raw", format="text", interval="PT5M")
    for index, name in enumerate(("out", "out/eu")):

        @pipeline.job(
            inputs=[raw],
            output=pipeline.dataset(name, format="parquet", interval="PT5M"),
            name=f"make{index}",
        )
        def make(raw: DataFrame, lot: Lot) -> DataFrame:
            return raw

    with pytest.raises(Conflict, match="shop:out/eu") as refused:
        register(lineage, pipeline)
    assert str(refused.value).count("shop:out") == 2  # both datasets named
    assert lineage.catalog.list_namespaces().items == []


def test_a_dataset_named_before_names_were_checked_does_not_stop_cleanup(lineage: Lineage) -> None:
    """A database may hold a produced dataset whose name is refused now (registered before the check):
    its manifest copies have no place in storage. Completing its lots and cleanup go on (before, a
    300-byte segment made every cleanup exit 1); the store is set up as the old check left it."""
    from datetime import UTC, datetime

    from lotline.store.queries import datasets as dataset_rows
    from lotline.store.queries import graph as graph_rows
    from lotline.store.queries import registry as registry_rows

    world = LotWorld(lineage, "shop")
    world.job("make", output="fine")
    lineage.catalog.upsert_dataset("shop", "old/_manifests/x")
    with lineage.store.write() as connection:
        job_id = graph_rows.job_id(connection, "shop", "make")
        legacy = dataset_rows.dataset_id(connection, "shop", "old/_manifests/x")
        assert job_id is not None and legacy is not None
        registry_rows.upsert_lot_job(connection, job_id, [legacy], [], None, datetime.now(UTC))
    claim = world.claim("make", LOT)
    assert claim is not None
    lineage.lots.complete(claim, outputs={claim.dataset: OutputWritten(ManifestDraft("file:///landing", ()))})
    report = lineage.cleanup.cleanup(grace=timedelta(0), max_lease=timedelta(seconds=1))
    assert report.copies_written == []


def test_lineage_names_that_are_no_paths_still_take_part_in_coordination(lineage: Lineage) -> None:
    """``postgres://db:5432`` is no path: such a dataset is never stored (every path built from it is
    refused), so registering it as a lot job's output checks no folder — coordination alone works."""
    world = LotWorld(lineage, "postgres://db:5432")
    world.job("load", output="public.orders")
    world.job("load-eu", output="public.orders/eu")
    world.produce("load", LOT)
    assert world.status("public.orders", LOT, "load") == "READY"
