"""The storage contract, on a local folder and on S3 (moto's server): layout, what an attempt
wrote, manifest copies, deletes, and names that would escape the root."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from lotline.domain.errors import InvalidInput, InvalidName
from lotline.domain.manifests import Manifest, ManifestObject, ManifestState, UriType, object_change
from lotline.storage.objects import Storage


def test_each_attempt_has_a_fresh_location_under_the_root(storage: Storage) -> None:
    first = storage.attempt_uri("shop", "raw/orders", "20230101PT5M050", 1)
    second = storage.attempt_uri("shop", "raw/orders", "20230101PT5M050", 2)
    assert first == f"{storage.root}/shop/raw/orders/lot=20230101PT5M050/attempt=1"
    assert second.endswith("/attempt=2")
    assert not second.startswith(first)


@pytest.mark.parametrize(
    ("namespace", "dataset"),
    [
        ("shop", "../escape"),
        ("shop", "a/../../escape"),
        ("..", "orders"),
        ("shop", "/etc/passwd"),
        ("shop", "a//b"),
        ("shop", "tab\there"),
        ("shop", "back\\slash"),
        ("shop", "_manifests"),
        ("", "orders"),
    ],
)
def test_names_that_would_escape_the_root_are_refused(storage: Storage, namespace: str, dataset: str) -> None:
    with pytest.raises(InvalidName):
        storage.attempt_uri(namespace, dataset, "20230101PT5M050", 1)


def test_a_lot_id_that_is_not_one_is_refused(storage: Storage) -> None:
    with pytest.raises(InvalidInput, match="lot id"):
        storage.attempt_uri("shop", "orders", "../x", 1)


def test_describe_written_lists_data_files_with_sizes_and_partitions(storage: Storage) -> None:
    location = storage.attempt_uri("shop", "orders", "2023-01-01", 1)
    storage.write_bytes(f"{location}/part-0000.parquet", b"x" * 10)
    storage.write_bytes(f"{location}/day=02/country=FR/part-0001.parquet", b"y" * 7)
    storage.write_bytes(f"{location}/_SUCCESS", b"")
    storage.write_bytes(f"{location}/.part-0000.parquet.crc", b"c")
    storage.write_bytes(f"{location}/_temporary/0/part-9.parquet", b"t")
    written = storage.describe_written(location, format="parquet")
    assert [(o.uri, o.size, dict(o.partition_values)) for o in written] == [
        (f"{location}/day=02/country=FR/part-0001.parquet", 7, {"day": "02", "country": "FR"}),
        (f"{location}/part-0000.parquet", 10, {}),
    ]
    assert all(o.modified_at.tzinfo is not None and o.format == "parquet" for o in written)
    assert (
        storage.describe_written(storage.attempt_uri("shop", "orders", "2023-01-01", 2), format="csv") == ()
    )


def test_an_unknown_format_is_refused(storage: Storage) -> None:
    with pytest.raises(InvalidInput, match="format"):
        storage.describe_written(storage.root, format="xlsx")


def _manifest(storage: Storage, state: ManifestState, attempt: int = 2) -> Manifest:
    location = storage.attempt_uri("shop", "raw/orders", "20230101PT5M050", attempt)
    now = datetime(2023, 1, 1, 4, 16, tzinfo=UTC)
    obj = ManifestObject(f"{location}/part-0.parquet", 12, now, "parquet", {"day": "01"})
    return Manifest(
        id=uuid.uuid4(),
        namespace="shop",
        dataset="raw/orders",
        lot="20230101PT5M050",
        state=state,
        attempt=attempt,
        run_id=uuid.uuid4(),
        version_id=uuid.uuid4(),
        version_number=3,
        uri_type=UriType.PATH,
        location=location,
        objects=(obj,),
        row_count=5,
        comment=None,
        created_at=now,
        updated_at=now,
    )


def test_manifest_copies_follow_the_layout_and_read_back(storage: Storage) -> None:
    complete = _manifest(storage, ManifestState.COMPLETE)
    uri = storage.write_manifest_copy(complete)
    assert uri == (
        f"{storage.root}/shop/_manifests/datasets/name=raw/orders/lot=20230101PT5M050/state=complete/manifest.json"
    )
    document = storage.read_manifest_copy(uri)
    assert document["state"] == "complete"
    assert document["lotId"] == "20230101PT5M050"
    assert document["version"]["number"] == 3
    assert document["uris"] == [complete.objects[0].uri]
    assert document["objects"][0]["partitionValues"] == {"day": "01"}
    assert ManifestObject.from_json(document["objects"][0]) == complete.objects[0]
    assert json.loads(storage.read_bytes(uri)) == document


def test_a_removed_manifest_replaces_its_partial_copy(storage: Storage) -> None:
    partial = _manifest(storage, ManifestState.PARTIAL)
    partial_uri = storage.write_manifest_copy(partial)
    assert partial_uri.endswith("/state=partial/attempt=2/manifest.json")
    removed = Manifest(**{**partial.__dict__, "state": ManifestState.REMOVED})
    removed_uri = storage.write_manifest_copy(removed)
    assert removed_uri.endswith("/state=removed/attempt=2/manifest.json")
    assert storage.exists(removed_uri)
    assert not storage.exists(partial_uri)


def test_delete_is_idempotent(storage: Storage) -> None:
    uri = f"{storage.root}/shop/orders/lot=1/attempt=1/part-0.csv"
    storage.write_bytes(uri, b"a,b\n")
    assert storage.delete([uri]) == 1
    assert storage.delete([uri]) == 0
    assert not storage.exists(uri)


def test_copy_in_brings_a_landing_file_into_storage(storage: Storage, tmp_path: object) -> None:
    source = f"{storage.root}/landing/file.txt"
    storage.write_bytes(source, b"hello")
    target = storage.attempt_uri("shop", "orders", "1", 1) + "/file.txt"
    storage.copy_in(source, target)
    assert storage.read_bytes(target) == b"hello"
    assert storage.stat(target).size == 5


def test_a_stat_agrees_with_what_describe_written_recorded(storage: Storage) -> None:
    """Readers compare an object's stat with its manifest's record (issue 29 §10): an untouched object
    must compare equal on each storage (S3 lists times in milliseconds, gives one in seconds)."""
    location = storage.attempt_uri("shop", "orders", "2023-01-01", 1)
    storage.write_bytes(f"{location}/part-0.txt", b"one\n")
    [recorded] = storage.describe_written(location, format="text")
    found = storage.stat(recorded.uri)
    assert found is not None and object_change(recorded, found.size, found.modified_at) is None
    storage.write_bytes(recorded.uri, b"one and two\n")
    changed = storage.stat(recorded.uri)
    assert changed is not None
    assert object_change(recorded, changed.size, changed.modified_at) is not None
    storage.delete([recorded.uri])
    assert storage.stat(recorded.uri) is None
