"""lotline's cost per lot beside Spark's: the demo pipeline over 48 five-minute lots, with lotline
and as a bare PySpark loop doing the same reads, transforms and writes, in one run.

    .venv/bin/python -m bench.overhead [--lots 48] [--rounds 4] [--master local[2] | sc://host:port]

Both sides run the example pipeline ``lotline.spark.examples.weblogs``'s first two jobs (parse 48
five-minute lots, roll them up into 4 hours: 52 Spark writes; its daily report needs all 24 hours
of a day) on the same SparkSession, against the same landing files. lotline's side is
``run_pipeline`` on an embedded SQLite database and a local
warehouse, as ``lotline run`` does it: claims, manifest-listed reads, attempt folders, manifests
from the written files, row counts from Spark's metrics, commits with versions and lot events. The
raw lots are registered before the clock starts (ingest is not part of the comparison). The bare
loop calls the same transforms on the same files and writes the same folders, with nothing else.
Rounds alternate which side goes first after a warm-up round of each (the JVM's JIT); each round's
ratio is its own pair, both sides' times are printed, and the median ratio is reported with the
machine's load average (other processes slow both sides: only the same-run ratio counts).
Target: at most 1.05 (issue 31); over Spark Connect, at most 1.10 (issue 41).

``--checks`` compares lotline with lotline instead: ``parse`` with three row expectations
(``CHECKS``: observed in the write's own pass) against ``parse`` with none, the same way
(alternating rounds, median ratio). Target: at most 1.05 (issue 30).
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from lotline.domain.lots import Interval, lot_at
from lotline.domain.manifests import ManifestDraft
from lotline.services import Lineage, open_lineage
from lotline.services.lots import OutputWritten
from lotline.spark.connect import is_connect_master
from lotline.spark.examples import sample_logs, weblogs
from lotline.spark.pipeline import Lot, Pipeline, expect
from lotline.spark.registration import register
from lotline.spark.run import run_pipeline
from lotline.spark.runner import LotRunner
from lotline.storage.objects import Storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

START = datetime(2026, 11, 2, 8, tzinfo=UTC)
FIVE_MINUTES = Interval.parse("PT5M")
HOUR = Interval.parse("PT1H")
JOBS = ("parse", "hourly_counts")
#: ``--checks``: three row expectations on parse's output (one warns on ~10% of rows).
CHECKS = (
    expect("status < 500", on_fail="warn"),
    expect("ts IS NOT NULL"),
    expect("bytes >= 0"),
)


def with_parse_checks(checks: tuple[object, ...]) -> Pipeline:
    """The example pipeline with ``checks`` as parse's checks (nothing else changed)."""
    pipeline = copy.copy(weblogs.p)
    parse = replace(weblogs.p.jobs["parse"], checks={"hits": checks} if checks else {})  # type: ignore[dict-item]
    pipeline.jobs = {**weblogs.p.jobs, "parse": parse}
    return pipeline


def _publish_raw(lineage: Lineage, files: list[sample_logs.LandingFile]) -> None:
    """Register each landing file as its five-minute lot of raw_logs, referenced in place."""
    namespace = weblogs.p.namespace
    lineage.lots.register_job(namespace, "ingest_raw_logs", output="raw_logs")
    for file in files:
        lot = str(lot_at(file.window_start, FIVE_MINUTES))
        claim = lineage.lots.claim("bench", namespace, "ingest_raw_logs", lot=lot)
        assert claim is not None
        uri = file.path.resolve().as_uri()
        objects = lineage.storage.describe_written(uri, format="text")
        lineage.lots.complete(claim, outputs={claim.dataset: OutputWritten(ManifestDraft(uri, objects))})


def lotline_round(
    spark: SparkSession,
    files: list[sample_logs.LandingFile],
    folder: Path,
    pipeline: Pipeline | None = None,
) -> float:
    """One lotline run; by default of the example pipeline without parse's check, as the bare loop
    checks nothing."""
    pipeline = pipeline or with_parse_checks(())
    folder.mkdir(parents=True)
    with open_lineage(f"sqlite:///{folder / 'lotline.db'}", Storage(str(folder / "warehouse"))) as lineage:
        register(lineage, pipeline)
        _publish_raw(lineage, files)
        runner = LotRunner(lineage, pipeline, spark)
        started = time.perf_counter()
        summary = run_pipeline(runner, pipeline.select(JOBS), worker="bench")
        elapsed = time.perf_counter() - started
    if summary.failed or sum(t.done for t in summary.tallies.values()) != len(files) + len(files) // 12:
        raise SystemExit(f"lotline did not do every lot: {summary}")
    return elapsed


def bare_round(spark: SparkSession, files: list[sample_logs.LandingFile], folder: Path) -> float:
    """The same transforms and writes as a plain loop: read, transform, write, per lot."""
    log = logging.getLogger("bench.bare")
    out = folder / "bare"

    def lot(id_: str) -> Lot:
        return Lot(id_, None, None, (), uuid.uuid4(), 1, spark, log)

    started = time.perf_counter()
    hours: dict[str, list[str]] = defaultdict(list)
    for file in files:
        five = str(lot_at(file.window_start, FIVE_MINUTES))
        target = (out / "hits" / five).as_uri()
        weblogs.parse(spark.read.text([file.path.resolve().as_uri()]), lot(five)).write.parquet(target)
        hours[str(lot_at(file.window_start, HOUR))].append(target)
    for hour, parts in sorted(hours.items()):
        target = (out / "hourly" / hour).as_uri()
        weblogs.hourly_counts(spark.read.parquet(*parts), lot(hour)).write.parquet(target)
    return time.perf_counter() - started


def _load() -> str:
    """The 1, 5 and 15 minute load averages (2 cores: above 2, other processes share them)."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _session(master: str) -> SparkSession:
    """A classic session on ``master``, or a Spark Connect client on an ``sc://`` URL (both sides of
    the comparison then run over Connect)."""
    from pyspark.sql import SparkSession

    from lotline.spark.connect import parse_url, start

    if is_connect_master(master):
        return start(parse_url(master), "lotline bench.overhead", {"spark.sql.session.timeZone": "UTC"})
    spark = (
        SparkSession.builder.master(master)
        .appName("lotline bench.overhead")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lots", type=int, default=48, help="five-minute lots (a multiple of 12)")
    parser.add_argument("--rounds", type=int, default=4, help="at least 4 (alternating)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--checks", action="store_true", help="parse with three row expectations against parse without"
    )
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    if args.lots % 12 or args.lots > 288 - 12 * START.hour:
        raise SystemExit("--lots must be a multiple of 12 within the day")
    spark = _session(args.master)
    with tempfile.TemporaryDirectory(prefix="lotline-bench-") as scratch:
        root = Path(scratch)
        files = sample_logs.write_access_logs(root / "landing", START, args.lots)
        lines = sum(f.lines for f in files)
        print(
            f"{args.lots} five-minute lots ({len(files)} files, {lines} lines), master {args.master}; "
            f"load average {_load()}",
            flush=True,
        )
        if args.checks:
            compare_checks(spark, files, root, args.rounds, args.lots)
            spark.stop()
            return
        bare_round(spark, files, root / "warm-bare")
        lotline_round(spark, files, root / "warm-lotline")
        ratios = []
        for index in range(args.rounds):
            first, second = ("lotline", "bare") if index % 2 == 0 else ("bare", "lotline")
            seconds = {}
            for side in (first, second):
                measure = lotline_round if side == "lotline" else bare_round
                seconds[side] = measure(spark, files, root / f"{side}-{index}")
            ratios.append(seconds["lotline"] / seconds["bare"])
            lots = args.lots + args.lots // 12
            more = 1000 * (seconds["lotline"] - seconds["bare"]) / lots
            print(
                f"round {index + 1} ({first} first): lotline {seconds['lotline']:.2f} s, bare loop "
                f"{seconds['bare']:.2f} s for {lots} lots ({more:.0f} ms more per lot); ratio "
                f"{ratios[-1]:.3f}; load average {_load()}",
                flush=True,
            )
        target = "1.10 over Spark Connect (issue 41)" if is_connect_master(args.master) else "1.05"
        print(
            f"median ratio lotline / bare PySpark over {len(ratios)} rounds: "
            f"{statistics.median(ratios):.3f} (rounds {min(ratios):.3f}-{max(ratios):.3f}; target <= "
            f"{target}); load average {_load()}"
        )
    spark.stop()


def compare_checks(
    spark: SparkSession, files: list[sample_logs.LandingFile], root: Path, rounds: int, lots: int
) -> None:
    """lotline with parse's three expectations against lotline without: alternating rounds."""
    sides: dict[str, Callable[[Path], float]] = {
        "checked": lambda f: lotline_round(spark, files, f, with_parse_checks(CHECKS)),
        "unchecked": lambda f: lotline_round(spark, files, f, with_parse_checks(())),
    }
    for name, measure in sides.items():
        measure(root / f"warm-{name}")
    ratios = []
    for index in range(rounds):
        order = ("checked", "unchecked") if index % 2 == 0 else ("unchecked", "checked")
        seconds = {side: sides[side](root / f"{side}-{index}") for side in order}
        ratios.append(seconds["checked"] / seconds["unchecked"])
        print(
            f"round {index + 1}: with 3 expectations {seconds['checked']:.2f} s, without "
            f"{seconds['unchecked']:.2f} s for {lots + lots // 12} lots; ratio {ratios[-1]:.3f}"
        )
    print(f"median ratio with / without 3 expectations: {statistics.median(ratios):.3f} (target <= 1.05)")


if __name__ == "__main__":
    main()
