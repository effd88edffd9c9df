"""``lotline demo``: the main job on the embedded default, start to finish, in a folder of its own.

A day of web access logs arrives in 5-minute files (a few busy hours; one interval with no file;
one file with a broken line). The demo ingests them into lots, runs the three-job example pipeline
(``lotline.spark.examples.weblogs``: parse -> hourly -> daily report) on Spark, watches the broken
lot fail without anything downstream reading it, has the sender fix the file, ingests the
correction (a new version of that lot), runs again (only what the failure held back runs), and
prints the status, the gaps and the report. Everything it does is what the commands do.
"""

from __future__ import annotations

import shlex
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from lotline.cli.context import lotline_command
from lotline.cli.run import print_summary, run_with_progress
from lotline.domain.errors import InvalidInput
from lotline.domain.grid import HEALTH_ORDER, CellState
from lotline.domain.ingress import TimeRule
from lotline.domain.lots import Interval, lot_at
from lotline.services import Lineage, open_lineage
from lotline.services.config import Settings, load_settings
from lotline.services.emission import consumer_for
from lotline.services.ingest import IngestRequest
from lotline.spark.connect import is_connect
from lotline.spark.examples import sample_logs
from lotline.spark.pipeline import Pipeline, load_pipeline
from lotline.spark.registration import register
from lotline.spark.run import RunSummary
from lotline.spark.runner import LotRunner
from lotline.spark.session import spark_session
from lotline.storage.objects import Storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Left in a demo folder so that a later ``lotline demo`` may replace it (and nothing else).
MARKER = ".lotline-demo"
PIPELINE_FILE = "weblogs.py"
NAMESPACE = "weblogs"
FIRST_HOUR, HOURS = 9, 3
#: raw_logs' late_after (weblogs.py): the lots the demo's ingest looks at are those due when it runs.
DEMO_LATENESS = timedelta(minutes=5)
EMPTY_WINDOW, MALFORMED_WINDOW = 17, 32  # 10:25 and 11:40 of the busy hours
TIME_PATTERN = r"(?P<year>\d{4})/(?P<month>\d\d)/(?P<day>\d\d)/(?P<hour>\d\d)(?P<minute>\d\d)\.log$"


def demo(
    directory: Annotated[
        Path, typer.Option("--dir", help="Folder to create (a previous demo's folder is replaced).")
    ] = Path("lotline-demo"),
) -> None:
    """Run the main job on the embedded default (SQLite, local files, Spark): sample data, ingest,
    a three-job pipeline, a failure and its fix, status, gaps. Then try `lotline serve` in the folder."""
    started = time.monotonic()
    console = Console(highlight=False)
    folder = _prepare(directory)
    day = (datetime.now(UTC) - timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    # The ingest looks at yesterday and today up to the lots due now: raw_logs' policy declares
    # the quiet intervals empty, so every lot up to now is there (docs/lots.md "Absence").
    upto = lot_at(datetime.now(UTC) - DEMO_LATENESS, Interval.parse("PT5M")).start
    settings = Settings(
        db_url=f"sqlite:///{folder / 'lotline.db'}",
        warehouse=str(folder / "warehouse"),
        api_token=None,
        spark_master=load_settings().spark_master,
    )
    shutil.copyfile(Path(sample_logs.__file__).with_name("weblogs.py"), folder / PIPELINE_FILE)
    pipeline = load_pipeline(str(folder / PIPELINE_FILE))

    console.rule("[bold]lotline demo[/bold]: web access logs, lot by lot")
    files = sample_logs.write_access_logs(
        folder / "landing",
        day + timedelta(hours=FIRST_HOUR),
        HOURS * 12,
        empty=frozenset({EMPTY_WINDOW}),
        malformed=frozenset({MALFORMED_WINDOW}),
    )
    broken = next(f for f in files if f.window_start == _window(day, MALFORMED_WINDOW))
    console.print(
        f"1. The sender wrote {len(files)} five-minute log files to landing/ for {day:%Y-%m-%d} "
        f"{FIRST_HOUR:02d}:00-{FIRST_HOUR + HOURS:02d}:00 UTC: nothing for "
        f"{_window(day, EMPTY_WINDOW):%H:%M}, and a broken line in {broken.path.relative_to(folder)}."
    )
    with open_lineage(
        settings.db_url, Storage(settings.warehouse), consumer=consumer_for(settings)
    ) as lineage:
        register(lineage, pipeline)
        console.print("2. Ingest the day, and today up to now, into five-minute lots of raw_logs:")
        _ingest(lineage, console, pipeline, folder, day, upto)
        with spark_session(settings, "lotline demo") as spark:
            if not is_connect(spark):  # a Connect server's log is its own
                spark.sparkContext.setLogLevel("FATAL")  # lotline reports failures itself, once
            runner = LotRunner(lineage, pipeline, spark)
            console.print(
                f"3. lotline run {PIPELINE_FILE}: parse -> hourly_counts -> daily_report "
                "(parse checks status < 500: a server error warns, the lot is still published)"
            )
            _report_run(console, pipeline, run_with_progress(runner, pipeline.ordered_jobs()))
            sample_logs.repair(broken)
            console.print(
                f"4. The sender fixes {broken.path.relative_to(folder)}; ingest sees the corrected file "
                "and gives its lot a new version."
            )
            console.print("5. Ingest again:")
            _ingest(lineage, console, pipeline, folder, day, upto)
            console.print(f"6. lotline run {PIPELINE_FILE} again: only what the failure held back runs")
            _report_run(console, pipeline, run_with_progress(runner, pipeline.ordered_jobs()))
            _show_report(console, lineage, pipeline, spark, day)
        _show_status(console, lineage, pipeline)
    console.rule(f"done in {time.monotonic() - started:.0f} s")
    _print_next(console, folder, day, upto)


def _print_next(console: Console, folder: Path, day: datetime, upto: datetime) -> None:
    """What to try next, each command as it can be typed: the folder to go to, lotline by the path
    that runs this one (unless ``lotline`` on the PATH is it), never wrapped at the terminal width."""
    me = lotline_command()
    lines = [
        ("cd " + shlex.quote(str(folder)), ""),
        (f"{me} serve", "then open http://127.0.0.1:5000"),
        (f"{me} status --lots", "every lot of the namespace weblogs"),
        (f"{me} gaps --job parse", "parse's lots from the first up to now, by state"),
        (f"{me} events", "the lot availability log"),
        (" ".join([me, *_ingest_args(day, upto)]), "ingest again: nothing changed, nothing to do"),
        (
            f"{me} run {PIPELINE_FILE}",
            "after editing a transform: a new job version; it names the lots the old one made (stale) "
            "and the backfill that remakes them",
        ),
    ]
    console.print("Next, one command per line (copy as printed):", soft_wrap=True)
    for command, comment in lines:
        console.print(f"  {command}" + (f"    # {comment}" if comment else ""), soft_wrap=True, markup=False)


def _ingest_args(day: datetime, upto: datetime) -> list[str]:
    """``lotline ingest`` as the demo runs it, every argument spelled out (run in the demo folder)."""
    return [
        "ingest",
        "-n",
        NAMESPACE,
        "--dataset",
        "raw_logs",
        "--landing",
        "landing",
        "--interval",
        "PT5M",
        "--time",
        shlex.quote("path:" + TIME_PATTERN),
        "--from",
        f"{day:%Y-%m-%d}",
        "--to",
        f"{upto:%Y-%m-%dT%H:%M:%SZ}",
    ]


def _prepare(directory: Path) -> Path:
    """An empty folder for the demo; a previous demo's folder is replaced, anything else refused."""
    folder = directory.resolve()
    if folder.exists():
        if not folder.is_dir():
            raise InvalidInput(f"{folder} exists and is not a folder.")
        if any(folder.iterdir()):
            if not (folder / MARKER).exists():
                raise InvalidInput(
                    f"{folder} is not empty and was not made by lotline demo; choose another --dir."
                )
            shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).write_text("made by `lotline demo`; the next demo run replaces this folder\n")
    return folder


def _window(day: datetime, index: int) -> datetime:
    return day + timedelta(hours=FIRST_HOUR, minutes=5 * index)


def _ingest(
    lineage: Lineage, console: Console, pipeline: Pipeline, folder: Path, day: datetime, upto: datetime
) -> None:
    """``lotline ingest`` over the whole day: lots with files, the rest closed as empty."""
    request = IngestRequest(
        namespace=pipeline.namespace,
        dataset="raw_logs",
        landing=str(folder / "landing"),
        interval=Interval.parse("PT5M"),
        time_rule=TimeRule.parse("path:" + TIME_PATTERN),
        start=day,
        end=upto,
    )
    report = lineage.ingest.ingest(request)
    console.print("   lotline " + " ".join(_ingest_args(day, upto)), soft_wrap=True, markup=False)
    quiet = _window(day, EMPTY_WINDOW).strftime("%Y%m%d") + f"PT5M{(FIRST_HOUR * 12 + EMPTY_WINDOW):03d}"
    said = f" (the quiet {_window(day, EMPTY_WINDOW):%H:%M} among them)" if quiet in report.empty else ""
    console.print(
        f"   {len(report.registered)} lots registered with their files, {len(report.empty)} empty by "
        f"raw_logs' arrival policy (absent=empty: no file in a closed interval means no requests){said}, "
        f"{len(report.missing)} missing, {len(report.reversioned)} given a new version, "
        f"{report.unchanged} unchanged"
    )


def _report_run(console: Console, pipeline: Pipeline, summary: RunSummary) -> None:
    print_summary(pipeline, summary, as_json=False)


def _show_report(
    console: Console, lineage: Lineage, pipeline: Pipeline, spark: SparkSession, day: datetime
) -> None:
    """The day's report, read the way any reader reads a lot: the objects its manifest lists."""
    lot = f"{day:%Y%m%d}P1D000"
    manifest = lineage.manifests.current(pipeline.namespace, "daily_report", lot)
    if manifest is None:
        console.print(f"[red]daily_report lot {lot} is not READY[/red]")
        return
    rows = spark.read.parquet(*[o.uri for o in manifest.objects]).orderBy("hits", ascending=False).collect()
    table = Table(title=f"daily_report lot {lot} (version {manifest.version_number}, {len(rows)} paths)")
    for column in ("path", "hits", "errors", "bytes"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for row in rows[:5]:
        table.add_row(row["path"], str(row["hits"]), str(row["errors"]), f"{row['bytes']:,}")
    console.print(table)


def _show_status(console: Console, lineage: Lineage, pipeline: Pipeline) -> None:
    """The lots of every job as the start page counts them (``lotline serve``): its words, totals."""
    healths = lineage.gaps.namespace_health(pipeline.namespace, now=datetime.now(UTC))
    # The start page names only the states some lot is in; so does this table, which then fits in 80
    # columns (all nine states and warned do not: rich cut every header to "compl…").
    shown = [s for s in HEALTH_ORDER if s == CellState.COMPLETE or any(h.totals.get(s) for h in healths)]
    absent = [s.value for s in HEALTH_ORDER if s not in shown]
    left_out = " or ".join([", ".join(absent[:-1]), absent[-1]] if len(absent) > 1 else absent)
    table = Table(
        title="lots by job, as the start page shows them (lotline gaps)",
        caption="warned: published with warnings (a warn check did not hold)"
        + (f"; no lot is {left_out}" if left_out else ""),
        box=None,
        padding=(0, 1, 0, 0),
    )
    table.add_column("job", no_wrap=True)
    for state in shown:
        table.add_column(state.value, justify="right")
    table.add_column("warned", justify="right")
    for health in healths:
        counts = [str(health.totals.get(state, 0)) for state in shown]
        table.add_row(health.job or health.dataset, *counts, str(health.warned))
    console.print(table)
