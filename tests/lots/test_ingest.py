"""Ingress (SPEC §5) on SQLite and PostgreSQL, from a local landing folder and from S3: files into
interval lots, empty intervals closed, idempotent rescans, late and corrected files re-versioning
their lot and reopening what was computed from it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lotline.domain.arrival import Absence
from lotline.domain.coordination import Status
from lotline.domain.errors import InvalidInput, InvalidName
from lotline.domain.ingress import TimeRule
from lotline.domain.lots import Interval
from lotline.domain.manifests import LotEventKind, ManifestState
from lotline.services import Lineage
from lotline.services.ingest import IngestRequest, ingest_job
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.lots import LotWorld
from support.storage import s3_options

NS = "lots"
DAY = datetime(2023, 1, 1, tzinfo=UTC)
NOW = DAY + timedelta(days=2)
PT5M = Interval.parse("PT5M")
BY_PATH = TimeRule.parse(r"path:(?P<year>\d{4})(?P<month>\d\d)(?P<day>\d\d)T(?P<hour>\d\d)(?P<minute>\d\d)")
LOT_0410, LOT_0415, LOT_0420 = "20230101PT5M050", "20230101PT5M051", "20230101PT5M052"


@pytest.fixture
def landing(storage: Storage) -> Storage:
    """A landing location of each kind: a local folder and an S3 bucket."""
    return storage


@pytest.fixture
def lineage_for(
    backend_url: str, tmp_path: Path, landing: Storage, request: pytest.FixtureRequest
) -> Iterator[Lineage]:
    options = s3_options(request.getfixturevalue("s3_endpoint")) if landing.protocol == "s3" else None
    service = Lineage.over(Store(backend_url), Storage(str(tmp_path / "warehouse")), options)
    yield service
    service.close()


def _land(landing: Storage, name: str, text: str = "a line\n") -> str:
    uri = f"{landing.root}/{name}"
    landing.write_bytes(uri, text.encode())
    return uri


def _window(first_minute: int, last_minute: int) -> dict[str, datetime]:
    """--from/--to around 04:MM of the test day."""
    return {
        "start": DAY + timedelta(hours=4, minutes=first_minute),
        "end": DAY + timedelta(hours=4, minutes=last_minute),
    }


def _request(landing: Storage, **more: object) -> IngestRequest:
    fields: dict[str, object] = {
        "namespace": NS,
        "dataset": "raw",
        "landing": landing.root,
        "interval": PT5M,
        "time_rule": BY_PATH,
        **more,
    }
    return IngestRequest(**fields)  # type: ignore[arg-type]


def _uris(lineage: Lineage, lot: str) -> list[str]:
    manifest = lineage.manifests.current(NS, "raw", lot)
    assert manifest is not None
    return [o.uri for o in manifest.objects]


def test_files_become_lots_and_an_interval_nothing_was_delivered_for_is_missing(
    lineage_for: Lineage, landing: Storage
) -> None:
    lineage = lineage_for
    a = _land(landing, "in/20230101T0411-a.log")
    b = _land(landing, "in/20230101T0413-b.log")
    c = _land(landing, "in/20230101T0420.log")
    _land(landing, "in/.20230101T0421.log.tmp")  # an upload in progress is not data
    report = lineage.ingest.ingest(
        _request(landing, **_window(10, 30)),
        now=NOW,
    )
    assert (report.files, report.registered, report.empty, report.missing) == (
        3,
        [LOT_0410, LOT_0420],
        {},
        [LOT_0415, "20230101PT5M053"],  # a range alone declares nothing empty
    )
    assert _uris(lineage, LOT_0410) == [a, b]  # referenced in place
    assert _uris(lineage, LOT_0420) == [c]
    assert lineage.manifests.current(NS, "raw", LOT_0415) is None
    statuses = {s.lot: s.status for s in lineage.lots.status(NS, job=ingest_job("raw"))}
    assert set(statuses.values()) == {Status.READY} and len(statuses) == 2
    assert [e.kind for e in lineage.lot_events.after(0)] == [LotEventKind.READY] * 2


def test_empty_lots_are_declared_by_a_marker_or_by_an_absent_empty_policy(
    lineage_for: Lineage, landing: Storage
) -> None:
    lineage = lineage_for
    _land(landing, "in/20230101T0411.log")
    _land(landing, "in/_EMPTY.20230101PT5M051", "")  # the sender: 04:15 had nothing
    report = lineage.ingest.ingest(_request(landing, **_window(10, 30)), now=NOW)
    assert report.empty == {LOT_0415: "the sender's marker in/_EMPTY.20230101PT5M051"}
    assert (report.registered, report.missing) == ([LOT_0410], [LOT_0420, "20230101PT5M053"])
    marked = lineage.manifests.current(NS, "raw", LOT_0415)
    assert marked is not None and marked.state is ManifestState.EMPTY
    assert marked.declared_by == "the sender's marker in/_EMPTY.20230101PT5M051"

    quiet = lineage.ingest.ingest(_request(landing, **_window(10, 30), absent=Absence.EMPTY), now=NOW)
    policy = "arrival policy (absent=empty, late_after=PT5M)"
    assert quiet.empty == {LOT_0420: policy, "20230101PT5M053": policy} and quiet.missing == []
    stored = lineage.arrival.of(NS, "raw")
    assert stored is not None
    assert (stored.policy.absent, stored.declared_in) == (Absence.EMPTY, "lotline ingest")
    declared = lineage.manifests.current(NS, "raw", LOT_0420)
    assert declared is not None and declared.declared_by == policy

    again = lineage.ingest.ingest(_request(landing, **_window(10, 30)), now=NOW)  # the stored policy holds
    assert (again.empty, again.missing, again.unchanged) == ({}, [], 4)


def test_a_rescan_changes_nothing(lineage_for: Lineage, landing: Storage) -> None:
    lineage = lineage_for
    _land(landing, "20230101T0411.log")
    first = lineage.ingest.ingest(_request(landing), now=NOW)
    assert first.registered == [LOT_0410]
    version = lineage.versions.current_version(NS, "raw", LOT_0410)
    events = lineage.lot_events.after(0)
    again = lineage.ingest.ingest(_request(landing), now=NOW)
    assert (again.registered, again.empty, again.reversioned, again.unchanged) == ([], {}, [], 1)
    assert lineage.versions.current_version(NS, "raw", LOT_0410) == version
    assert lineage.lot_events.after(0) == events


def test_a_late_file_reversions_its_lot_and_reopens_downstream(
    lineage_for: Lineage, landing: Storage
) -> None:
    lineage = lineage_for
    world = LotWorld(lineage, NS)
    _land(landing, "20230101T0411.log")
    lineage.ingest.ingest(_request(landing), now=NOW)
    world.job("parse", output="hits", inputs=["raw"])
    world.produce("parse", LOT_0410)
    assert world.status("hits", LOT_0410, "parse") == "READY"

    late = _land(landing, "20230101T0414-late.log")
    rejected = lineage.ingest.ingest(_request(landing, reject_late=True), now=NOW)
    assert rejected.rejected == [LOT_0410] and late not in _uris(lineage, LOT_0410)
    assert world.status("hits", LOT_0410, "parse") == "READY"  # only reported

    report = lineage.ingest.ingest(_request(landing), now=NOW)
    assert report.reversioned == [LOT_0410]
    assert late in _uris(lineage, LOT_0410)
    version = lineage.versions.current_version(NS, "raw", LOT_0410)
    assert version is not None and version.number == 2
    assert world.status("hits", LOT_0410, "parse") == "RESUBMIT"  # downstream reopened: recomputed next
    assert world.claim("parse") is not None


def test_a_corrected_or_removed_file_gives_its_lot_a_new_version(
    lineage_for: Lineage, landing: Storage
) -> None:
    lineage = lineage_for
    uri = _land(landing, "20230101T0411.log", "broken\n")
    lineage.ingest.ingest(_request(landing), now=NOW)
    _land(landing, "20230101T0411.log", "fixed, longer\n")
    assert lineage.ingest.ingest(_request(landing), now=NOW).reversioned == [LOT_0410]
    manifest = lineage.manifests.current(NS, "raw", LOT_0410)
    assert manifest is not None and manifest.objects[0].size == len("fixed, longer\n")
    landing.delete([uri])
    report = lineage.ingest.ingest(
        _request(landing, **_window(10, 15)),
        now=NOW,
    )
    assert report.reversioned == [LOT_0410]
    emptied = lineage.manifests.current(NS, "raw", LOT_0410)
    assert emptied is not None and emptied.state is ManifestState.EMPTY
    assert [m.state for m in lineage.manifests.history(NS, "raw", LOT_0410)] == [
        ManifestState.COMPLETE,
        ManifestState.COMPLETE,
        ManifestState.EMPTY,
    ]


def test_unreadable_times_are_reported_and_skipped(lineage_for: Lineage, landing: Storage) -> None:
    lineage = lineage_for
    _land(landing, "20230101T0411.log")
    _land(landing, "no-time-here.log")
    _land(landing, "20231399T0411.log")  # month 13
    report = lineage.ingest.ingest(_request(landing), now=NOW)
    assert report.registered == [LOT_0410]
    assert len(report.skipped) == 2
    assert any("no-time-here.log" in reason and "does not match" in reason for reason in report.skipped)
    assert any("20231399T0411.log" in reason and "no valid time" in reason for reason in report.skipped)


def test_open_intervals_wait(lineage_for: Lineage, landing: Storage) -> None:
    lineage = lineage_for
    _land(landing, "20230101T0411.log")
    report = lineage.ingest.ingest(_request(landing), now=DAY + timedelta(hours=4, minutes=17))
    assert (report.registered, report.waiting) == ([], [LOT_0410])  # 04:15 + 5 min lateness not reached
    assert lineage.manifests.current(NS, "raw", LOT_0410) is None


def test_copy_brings_files_into_the_attempt_location(lineage_for: Lineage, landing: Storage) -> None:
    lineage = lineage_for
    _land(landing, "d/20230101T0411.log", "x\n")
    lineage.ingest.ingest(_request(landing, copy=True), now=NOW)
    manifest = lineage.manifests.current(NS, "raw", LOT_0410)
    assert manifest is not None
    location = lineage.storage.attempt_uri(NS, "raw", LOT_0410, 1)
    assert manifest.location == location
    assert [o.uri for o in manifest.objects] == [f"{location}/d/20230101T0411.log"]
    assert lineage.storage.read_bytes(manifest.objects[0].uri) == b"x\n"


def test_mtime_places_files_by_their_modification_time(lineage: Lineage, tmp_path: Path) -> None:
    folder = tmp_path / "landing"
    folder.mkdir()
    for name, minute in (("a.log", 11), ("b.log", 22)):
        (folder / name).write_text("line\n")
        at = (DAY + timedelta(hours=4, minutes=minute)).timestamp()
        os.utime(folder / name, (at, at))
    request = IngestRequest(NS, "raw", str(folder), PT5M)
    report = lineage.ingest.ingest(request, now=NOW)
    assert report.registered == [LOT_0410, LOT_0420] and report.missing == [LOT_0415]


def test_bad_input_is_refused_and_changes_nothing(lineage: Lineage, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="does not exist"):
        lineage.ingest.ingest(IngestRequest(NS, "raw", str(tmp_path / "nowhere"), PT5M), now=NOW)
    (tmp_path / "in").mkdir()
    with pytest.raises(InvalidName):
        lineage.ingest.ingest(IngestRequest(NS, "../raw", str(tmp_path / "in"), PT5M, copy=True), now=NOW)
    with pytest.raises(InvalidInput, match="--from and --to"):
        lineage.ingest.ingest(IngestRequest(NS, "raw", str(tmp_path / "in"), PT5M, start=DAY), now=NOW)
    for bad in ("path:(unclosed", "path:(?P<when>.*)", "ctime"):
        with pytest.raises(InvalidInput, match="--time"):
            TimeRule.parse(bad)
    assert lineage.lots.status() == []
    assert [n.name for n in lineage.catalog.list_namespaces().items] == []


def _folder(tmp_path: Path, *names: str) -> Path:
    """A local landing folder with a one-line file of each name."""
    folder = tmp_path / "landing"
    folder.mkdir()
    for name in names:
        (folder / name).write_text("line\n")
    return folder


def test_another_interval_is_refused_naming_both(lineage: Lineage, tmp_path: Path) -> None:
    folder = _folder(tmp_path, "20230101T0411.log")
    by_path = {"time_rule": BY_PATH, "start": DAY + timedelta(hours=4), "end": DAY + timedelta(hours=5)}
    lineage.ingest.ingest(IngestRequest(NS, "raw", str(folder), PT5M, **by_path), now=NOW)  # type: ignore[arg-type]
    before = (lineage.lots.status(NS), [m.id for m in lineage.manifests.history(NS, "raw", LOT_0410)])
    for other in ("PT1H", "PT30M"):
        request = IngestRequest(NS, "raw", str(folder), Interval.parse(other), **by_path)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match=f"{NS}:raw has PT5M lots; --interval {other} "):
            lineage.ingest.ingest(request, now=NOW)
    assert (lineage.lots.status(NS), [m.id for m in lineage.manifests.history(NS, "raw", LOT_0410)]) == before


def test_the_format_defaults_to_the_registered_one_else_the_extension(
    lineage: Lineage, tmp_path: Path
) -> None:
    folder = tmp_path / "landing"
    folder.mkdir()
    (folder / "20230101T0411.csv").write_text("a,b\n1,2\n")
    lineage.ingest.ingest(IngestRequest(NS, "flights", str(folder), PT5M, BY_PATH), now=NOW)
    manifest = lineage.manifests.current(NS, "flights", LOT_0410)
    assert manifest is not None and [o.format for o in manifest.objects] == ["csv"]
    # A dataset registered as json keeps its format whatever the next file is called.
    (folder / "20230101T0421.txt").write_text('{"a": 1}\n')
    lineage.ingest.ingest(IngestRequest(NS, "events", str(folder), PT5M, BY_PATH, format="json"), now=NOW)
    (folder / "20230101T0431.txt").write_text('{"a": 2}\n')
    lineage.ingest.ingest(IngestRequest(NS, "events", str(folder), PT5M, BY_PATH), now=NOW)
    later = lineage.manifests.current(NS, "events", "20230101PT5M054")
    assert later is not None and {o.format for o in later.objects} == {"json"}


def test_a_time_pattern_that_matches_nothing_registers_nothing(lineage: Lineage, tmp_path: Path) -> None:
    folder = _folder(tmp_path, "a.log", "b.log")
    report = lineage.ingest.ingest(
        IngestRequest(NS, "raw", str(folder), PT5M, BY_PATH, start=DAY, end=DAY + timedelta(hours=1)), now=NOW
    )
    assert (report.unmatched, report.files, report.registered, report.empty) == (True, 2, [], {})
    assert lineage.lots.status() == [] and lineage.catalog.list_namespaces().items == []


def test_an_ingested_dataset_is_where_its_files_are_and_empty_lots_have_no_rows(
    lineage: Lineage, tmp_path: Path
) -> None:
    folder = _folder(tmp_path, "20230101T0411.log")
    window = {"start": DAY + timedelta(hours=4, minutes=10), "end": DAY + timedelta(hours=4, minutes=20)}
    lineage.ingest.ingest(
        IngestRequest(
            NS, "raw", "./" + os.path.relpath(folder), PT5M, BY_PATH, **window, absent=Absence.EMPTY
        ),  # type: ignore[arg-type]
        now=NOW,
    )
    raw = lineage.catalog.get_dataset(NS, "raw")
    assert raw.physical_name == f"file://{folder}"
    assert (raw.facets["datasetType"]["datasetType"], raw.facets["storage"]["fileFormat"]) == ("FILE", "text")
    empty = lineage.manifests.current(NS, "raw", LOT_0415)
    assert empty is not None and empty.state is ManifestState.EMPTY and empty.row_count == 0
    lineage.ingest.ingest(IngestRequest(NS, "copied", str(folder), PT5M, BY_PATH, copy=True), now=NOW)
    assert lineage.catalog.get_dataset(NS, "copied").physical_name == lineage.storage.dataset_uri(
        NS, "copied"
    )
