"""Mismatches refused before anything runs (issue 27 §3): ``lotline run`` in this process, and as a
user runs it, a separate process, where nothing is eligible (Spark is not started). A refusal is one
line, exit code 2, and registers nothing."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.processes import lotline
from support.spark import PIPELINES, ingest

NS = "weblogs"
#: A master nothing listens on: a run that started Spark would not print its summary.
NO_SPARK = {"LOTLINE_SPARK_MASTER": "spark://127.0.0.1:9"}


def _lineage(backend_url: str, tmp_path: Path, warehouse: str = "warehouse") -> Lineage:
    return Lineage.over(Store(backend_url), Storage(str(tmp_path / warehouse)))


def _pipeline(tmp_path: Path, *replacements: tuple[str, str]) -> Path:
    source = (PIPELINES / "weblogs.py").read_text()
    for old, new in replacements:
        assert old in source
        source = source.replace(old, new)
    path = tmp_path / "weblogs.py"
    path.write_text(source)
    return path


def _run(
    pipeline: Path, backend_url: str, tmp_path: Path, *options: str, process: bool = False
) -> tuple[int, str, str]:
    """``lotline run PIPELINE OPTIONS`` with a Spark master nothing listens on. In this process (a
    refusal is proven before Spark by what it leaves unregistered: ``lotline run`` registers before
    it starts Spark), or, with ``process``, as the user runs it: there a run that started Spark
    would fail, where in this process the suite's session would be found."""
    settings = {"LOTLINE_WAREHOUSE": str(tmp_path / "warehouse"), **NO_SPARK}
    args = ("run", str(pipeline), *options)
    done = lotline(*args, cwd=tmp_path, db_url=backend_url, settings=settings, process=process)
    return done.returncode, done.stdout, done.stderr


def _done(done: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    return done.returncode, done.stdout, done.stderr


def _refused(result: tuple[int, str, str], *words: str) -> None:
    returncode, _stdout, stderr = result
    assert returncode == 2, stderr
    [line] = stderr.strip().splitlines()
    assert line.startswith("lotline: error:"), line
    for word in words:
        assert word in line, line


def _ingested(lineage: Lineage, lot: str = "20230101PT30M000") -> None:
    lineage.catalog.upsert_namespace(NS)
    lineage.catalog.upsert_dataset(NS, "raw_logs")
    ingest(lineage, NS, "raw_logs", lot, [["2023-01-01T00:01:00 /a 200"]])


def _registration(lineage: Lineage) -> tuple[list[str], list[str]]:
    datasets = sorted(d.name for d in lineage.catalog.list_datasets(NS).items)
    jobs = sorted(j.name for j in lineage.catalog.list_jobs(NS).items)
    return datasets, jobs


@pytest.mark.parametrize(
    ("replacements", "words"),
    [
        pytest.param(
            [('p.dataset("raw_logs"', 'p.dataset("raw_lgs"'), ("raw_logs:", "raw_lgs:")],
            [f"{NS}:raw_lgs", "did you mean `raw_logs`?"],
            id="typo",
        ),
        pytest.param(
            [
                ('interval="PT30M")\nhits', 'interval="PT5M")\nhits'),
                ('interval="PT30M")\nhourly', 'interval="PT5M")\nhourly'),
            ],
            [f"{NS}:raw_logs has PT30M lots", "declares it with PT5M"],
            id="interval",
        ),
    ],
)
def test_a_mismatch_is_refused_and_registers_nothing(
    backend_url: str, tmp_path: Path, replacements: list[tuple[str, str]], words: list[str]
) -> None:
    with _lineage(backend_url, tmp_path) as lineage:
        _ingested(lineage)
        before = _registration(lineage)
        _refused(_run(_pipeline(tmp_path, *replacements), backend_url, tmp_path), *words)
        assert _registration(lineage) == before  # no ghost dataset, no job


def test_a_source_nothing_fills_says_what_to_run(backend_url: str, tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path)
    _refused(
        _run(pipeline, backend_url, tmp_path),
        "has no lots yet",
        f"lotline ingest -n {NS} -d raw_logs --create --landing FOLDER --interval PT30M",
    )
    with _lineage(backend_url, tmp_path) as lineage:
        assert lineage.catalog.list_namespaces().items == []


def _one_lot_parsed(backend_url: str, tmp_path: Path) -> Path:
    """Lot 000 ingested and parsed, lot 001 never arrived: nothing is eligible (the hour waits)."""
    with _lineage(backend_url, tmp_path) as lineage:
        _ingested(lineage)
        pipeline = _pipeline(tmp_path)
        register(lineage, load_pipeline(str(pipeline)))
        claim = lineage.lots.claim("test", NS, "parse")
        assert claim is not None and claim.lot == "20230101PT30M000"
        lineage.lots.complete(claim)
    return pipeline


def test_a_run_with_nothing_eligible_does_not_start_spark(backend_url: str, tmp_path: Path) -> None:
    pipeline = _one_lot_parsed(backend_url, tmp_path)
    returncode, stdout, stderr = _run(pipeline, backend_url, tmp_path, process=True)
    assert returncode == 0, stderr
    # As lotline status counts them: the last year up to now, where the source stopped in 2023 —
    # every lot since blocked on its missing input, the ones not yet due pending.
    assert re.fullmatch(
        r"no eligible lots for parse, hourly_counts \(\d{4}-\d\d-\d\d \d\d:\d\d to now, "
        r"\d{4}-\d\d-\d\d \d\d:\d\d UTC\): (\d+ pending, )?\d+ blocked; Spark was not started \(new "
        r"input lots, `lotline invalidate` or `lotline backfill` make lots eligible\)",
        stdout.strip(),
    ), stdout


def test_a_source_nothing_fills_refuses_only_the_jobs_that_read_it(backend_url: str, tmp_path: Path) -> None:
    """``--job parse`` is not refused for a source only another job of the pipeline reads."""
    pipeline = _one_lot_parsed(backend_url, tmp_path)
    with pipeline.open("a") as more:
        more.write(
            "\n\nclicks = p.dataset('clicks', format='text', interval='PT1H')\n"
            "clicked = p.dataset('clicked', format='parquet', interval='PT1H')\n\n\n"
            "@p.job(inputs=[clicks], output=clicked)\n"
            "def count_clicks(clicks: DataFrame) -> DataFrame:\n"
            "    return clicks\n"
        )
    returncode, stdout, stderr = _run(pipeline, backend_url, tmp_path, "--job", "parse")
    assert returncode == 0, stderr
    assert stdout.startswith("no eligible lots for parse ("), stdout
    _refused(
        _run(pipeline, backend_url, tmp_path, "--job", "count_clicks"),
        f"source dataset {NS}:clicks has no lots yet",
    )


def test_another_warehouse_rewrites_no_location_it_did_not_write(backend_url: str, tmp_path: Path) -> None:
    first = _lineage(backend_url, tmp_path, "warehouse")
    try:
        _ingested(first)
        first.catalog.upsert_dataset(NS, "raw_logs", physical_name="file:///landing/raw")
        register(first, load_pipeline(str(_pipeline(tmp_path))))
        found = first.catalog.list_datasets(NS).items
        recorded = {d.name: d.physical_name for d in found}
        kinds = {
            d.name: (d.facets["datasetType"]["datasetType"], d.facets["storage"]["fileFormat"]) for d in found
        }
    finally:
        first.close()
    # each is files of the format the pipeline reads or writes it in, not the catalog's DB_TABLE
    assert kinds == {
        "raw_logs": ("FILE", "text"),
        **dict.fromkeys(("hits", "hourly_hits"), ("FILE", "parquet")),
    }
    assert recorded["raw_logs"] == "file:///landing/raw"
    assert recorded["hits"] == f"file://{tmp_path / 'warehouse' / NS / 'hits'}"
    second = _lineage(backend_url, tmp_path, "elsewhere")
    try:
        register(second, load_pipeline(str(tmp_path / "weblogs.py")))
        assert {d.name: d.physical_name for d in second.catalog.list_datasets(NS).items} == recorded
    finally:
        second.close()


def test_a_module_name_that_is_a_file_suggests_the_file(tmp_path: Path) -> None:
    (tmp_path / "seattle.py").write_text("x = 1\n")
    _refused(
        _done(lotline("run", "seattle", cwd=tmp_path)),
        "did you mean the file `seattle.py`?",
    )
    broken = tmp_path / "broken.py"
    broken.write_text(
        "from lotline.spark.pipeline import Pipeline\n\np = Pipeline('b')\nprint(undefined_name)\n"
    )
    _refused(
        _done(lotline("run", str(broken), cwd=tmp_path)),
        "NameError: name 'undefined_name' is not defined",
        f"({broken}, line 4)",
    )


def test_json_says_nothing_was_eligible(backend_url: str, tmp_path: Path) -> None:
    returncode, stdout, stderr = _run(_one_lot_parsed(backend_url, tmp_path), backend_url, tmp_path, "--json")
    assert returncode == 0, stderr
    assert json.loads(stdout)["nothingEligible"].startswith("no eligible lots for parse, hourly_counts")
