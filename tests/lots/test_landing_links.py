"""Symbolic links in a landing folder (issue 29 §5): ``ln -s /etc/hostname landing/…/0005.log``
made ``lotline ingest --copy`` copy that file into the warehouse (and an in-place ingest list it).
A link that leaves the landing location, or points at nothing, is refused naming it, and nothing is
registered; a link to a file inside the landing is data like any file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from lotline.domain.errors import InvalidInput
from lotline.domain.ingress import TimeRule
from lotline.domain.lots import Interval
from lotline.services import Lineage
from lotline.services.ingest import IngestRequest
from support.processes import lotline

NS = "lots"
PATTERN = r"path:(?P<year>\d{4})(?P<month>\d\d)(?P<day>\d\d)T(?P<hour>\d\d)(?P<minute>\d\d)"
NOW = datetime(2023, 1, 3, tzinfo=UTC)
WINDOW = {"start": datetime(2023, 1, 1, 4, 10, tzinfo=UTC), "end": datetime(2023, 1, 1, 4, 20, tzinfo=UTC)}
SECRET = b"secret outside the landing\n"


def _landing(tmp_path: Path) -> Path:
    landing = tmp_path / "landing"
    (landing / "2023").mkdir(parents=True)
    (landing / "2023" / "20230101T0411.log").write_text("a line\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "hostname").write_bytes(SECRET)
    return landing


def _request(landing: Path, copy: bool) -> IngestRequest:
    return IngestRequest(
        NS, "raw", str(landing), Interval.parse("PT5M"), TimeRule.parse(PATTERN), copy=copy, **WINDOW
    )


def _warehouse_holds(tmp_path: Path, data: bytes) -> bool:
    return any(p.is_file() and p.read_bytes() == data for p in (tmp_path / "warehouse").rglob("*"))


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "in-place"])
@pytest.mark.parametrize("target", ["outside/hostname", "outside", "nowhere/at/all"])
def test_a_link_leaving_the_landing_is_refused_and_nothing_is_registered(
    lineage: Lineage, tmp_path: Path, copy: bool, target: str
) -> None:
    landing = _landing(tmp_path)
    (landing / "2023" / "20230101T0412.log").symlink_to(tmp_path / target)
    with pytest.raises(InvalidInput, match=r"2023/20230101T0412\.log is a symbolic link") as refused:
        lineage.ingest.ingest(_request(landing, copy), now=NOW)
    assert "\n" not in str(refused.value)
    assert lineage.catalog.list_namespaces().items == []
    assert lineage.lots.status() == []
    assert not _warehouse_holds(tmp_path, SECRET)


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "in-place"])
def test_a_link_inside_the_landing_is_data(lineage: Lineage, tmp_path: Path, copy: bool) -> None:
    landing = _landing(tmp_path)
    (landing / "20230101T0416.log").symlink_to(landing / "2023" / "20230101T0411.log")
    (landing / "again").symlink_to(landing / "2023")  # a folder inside: its files are listed anyway
    report = lineage.ingest.ingest(_request(landing, copy), now=NOW)
    assert report.registered == ["20230101PT5M050", "20230101PT5M051"] and report.files == 2
    manifest = lineage.manifests.current(NS, "raw", "20230101PT5M051")
    assert manifest is not None and [o.size for o in manifest.objects] == [len("a line\n")]


def test_the_cli_says_it_in_one_line(backend_url: str, tmp_path: Path) -> None:
    landing = _landing(tmp_path)
    (landing / "2023" / "20230101T0412.log").symlink_to(tmp_path / "outside" / "hostname")
    args = ("ingest", "--create", "-n", NS, "-d", "raw", "--landing", str(landing))
    args = (*args, "--interval", "PT5M", "--copy")
    window = ("--from", "2023-01-01T04:10:00", "--to", "2023-01-01T04:20:00", "--time", PATTERN)
    done = lotline(*args, *window, cwd=tmp_path, db_url=backend_url)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "20230101T0412.log is a symbolic link to" in lines[0], done.stderr
    assert not _warehouse_holds(tmp_path, SECRET)
