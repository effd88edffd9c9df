"""``lotline run PIPELINE``: process every eligible lot of a pipeline on Spark, then exit."""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from lotline.cli.context import lotline_command
from lotline.domain.coordination import Status, gave_up_line
from lotline.domain.errors import InvalidInput, LotlineError
from lotline.domain.failures import INTERRUPTED
from lotline.domain.gaps import TimeRange
from lotline.domain.grid import HEALTH_ORDER, CellState, covered
from lotline.services import Lineage, open_configured
from lotline.services.config import Settings, load_settings
from lotline.services.ingest import ingest_job
from lotline.spark.pipeline import JobSpec, Pipeline
from lotline.spark.registration import register
from lotline.spark.run import RunSummary, Window, run_pipeline
from lotline.spark.runner import RUNNER_LEASE, LotResult, LotRunner
from lotline.spark.session import check_master, load_pipeline_with_spark, spark_session

#: Arguments ``lotline run`` and ``lotline worker`` share.
PipelineArgument = Annotated[
    str, typer.Argument(help="A pipeline file (path/to/pipeline.py) or module name.")
]
JobsOption = Annotated[
    list[str] | None, typer.Option("--job", "-j", help="Only this job (repeatable); default: all.")
]
DEFAULT_LEASE_S = RUNNER_LEASE.total_seconds()
#: Log levels at which Ctrl-C also silences Spark (which logs each task it cancels as an ERROR).
QUIET_LEVELS = ("OFF", "FATAL", "ERROR")
#: A run stopped by Ctrl-C exits as a shell's interrupted command does (128 + SIGINT).
INTERRUPTED_EXIT = 130
VerboseOption = Annotated[
    bool, typer.Option("--verbose", "-v", help="Show Spark's own log from WARN up (default: errors only).")
]
LeaseOption = Annotated[
    float, typer.Option(min=1, help="Seconds a claim lives without a heartbeat (beaten every third).")
]


def run(
    pipeline: PipelineArgument,
    job: JobsOption = None,
    start: Annotated[
        datetime | None,
        typer.Option("--from", help="Only lots whose window ends after this (UTC, 2023-01-01T04:00:00)."),
    ] = None,
    end: Annotated[
        datetime | None, typer.Option("--to", help="Only lots whose window starts before this (UTC).")
    ] = None,
    workers: Annotated[
        int, typer.Option(min=1, help="Concurrent claim loops sharing this process's SparkSession.")
    ] = 1,
    retries: Annotated[int, typer.Option(min=0, help="Run a failed lot again up to N times.")] = 0,
    lease: LeaseOption = DEFAULT_LEASE_S,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    verbose: VerboseOption = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Load and check the pipeline, print its jobs; touch nothing.")
    ] = False,
) -> None:
    """Register the pipeline's datasets and jobs, run every eligible lot (downstream lots too, as they
    become eligible), print a summary. Exit code 1 if a lot is left failed."""
    settings = with_verbosity(load_settings(), verbose)
    loaded = load_pipeline_with_spark(settings, pipeline)
    jobs = loaded.select(job) if job else loaded.ordered_jobs()
    window = _window(start, end)
    if dry_run:
        _print_plan(loaded, jobs, as_json)
        return
    check_master(settings.spark_master)
    with open_configured(settings) as lineage:
        try:
            summary = _run(
                lineage,
                loaded,
                settings,
                jobs,
                workers=workers,
                retries=retries,
                lease=timedelta(seconds=lease),
                window=window,
                quiet=as_json,
            )
        except NothingEligible as nothing:
            document = {"pipeline": loaded.name, "namespace": loaded.namespace, "jobs": [], "errors": []}
            print(json.dumps({**document, "nothingEligible": str(nothing)}) if as_json else str(nothing))
            return
        stale = stale_lots(lineage, loaded, jobs)
    print_summary(loaded, summary, as_json)
    if not as_json:
        for _, line in stale:
            print(line)
    if summary.interrupted:
        raise typer.Exit(code=INTERRUPTED_EXIT)
    if summary.failed:
        raise typer.Exit(code=1)


def with_verbosity(settings: Settings, verbose: bool) -> Settings:
    """``--verbose``: Spark's log from WARN up, whatever LOTLINE_LOG_LEVEL says."""
    return replace(settings, log_level="WARN") if verbose else settings


def _window(start: datetime | None, end: datetime | None) -> Window | None:
    if start is None and end is None:
        return None
    if start is None or end is None:
        raise InvalidInput("--from and --to go together.")
    start, end = (t if t.tzinfo else t.replace(tzinfo=UTC) for t in (start, end))
    if end <= start:
        raise InvalidInput(f"--to {end.isoformat()} is not after --from {start.isoformat()}.")
    return Window(start, end)


def _run(
    lineage: Lineage,
    pipeline: Pipeline,
    settings: Settings,
    jobs: list[JobSpec],
    *,
    workers: int,
    retries: int,
    lease: timedelta,
    window: Window | None,
    quiet: bool,
) -> RunSummary:
    """Register first (a bad registration fails fast), then start Spark, which takes seconds —
    unless no job has an eligible lot: then ``NothingEligible`` says so without starting Spark."""
    register(lineage, pipeline, running=jobs)
    lineage.lots.reap()  # a killed run's expired claim makes its lot eligible again
    eligible = lineage.sources.eligible(pipeline.namespace, [j.name for j in jobs])
    claimed = any(lineage.lots.counts(pipeline.namespace, j.name).get(Status.RUNNING) for j in jobs)
    if not claimed and all(count == 0 for count in eligible.values()):  # held lots: the run reports them
        raise NothingEligible(_nothing_eligible(lineage, pipeline, jobs))
    with spark_session(settings, f"lotline {pipeline.name}") as spark:
        silence = settings.log_level in QUIET_LEVELS
        runner = LotRunner(lineage, pipeline, spark, lease=lease, quiet=silence)
        with interrupting(runner):
            return run_with_progress(
                runner, jobs, workers=workers, retries=retries, window=window, quiet=quiet
            )


@contextmanager
def interrupting(runner: LotRunner) -> Iterator[None]:
    """Ctrl-C (SIGINT) interrupts the runner first (its lots in progress fail as ``interrupted by
    the user``, not as Spark's cancelled jobs), then the main thread. Replaces PySpark's handler,
    which only cancels the jobs."""

    def on_interrupt(_signum: int, _frame: FrameType | None) -> None:
        runner.interrupt()
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        with quiet_py4j():
            yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def quiet_py4j() -> Iterator[None]:
    """Without py4j's log records (an interrupted call, the connections it then closes)."""
    root, py4j = logging.getLogger(), logging.getLogger("py4j")
    level = py4j.level
    root.addFilter(_not_py4j)
    py4j.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        py4j.setLevel(level)
        root.removeFilter(_not_py4j)


def _not_py4j(record: logging.LogRecord) -> bool:
    """py4j logs an interrupted call and the connections it then closes, with their tracebacks
    (some on the root logger): the run reports the interruption itself, once."""
    return f"{os.sep}py4j{os.sep}" not in record.pathname


class NothingEligible(Exception):
    """No job of the run has a lot to claim: Spark was not started (the reason is the message)."""


def _nothing_eligible(lineage: Lineage, pipeline: Pipeline, jobs: list[JobSpec]) -> str:
    """``no eligible lots for parse, hourly (2025-11-28 09:00 to now, 2026-11-28 09:00 UTC): 72
    complete, 3 empty, 1 failed`` — the jobs' lots in the words, totals and range of ``lotline
    status`` and the start page (each job's health: lots due with no row included, an empty lot
    told from a complete one, the most recent ``DEFAULT_SPAN`` at most)."""
    now = lineage.clock.now()
    healths = [lineage.gaps.health(pipeline.namespace, job=job.name, now=now) for job in jobs]
    totals: Counter[CellState] = Counter()
    for health in healths:
        totals.update(health.totals)
    counted = covered(h.range for h in healths)
    over = "" if counted is None else f" ({counted.label})"
    stale = "".join(f"; {line}" for _, line in stale_lots(lineage, pipeline, jobs))
    counts = ", ".join(f"{totals[s]} {s.value}" for s in HEALTH_ORDER if totals[s])
    produced = {d.name for job in pipeline.jobs.values() for d in job.outputs}
    sources = sorted({d.name for job in jobs for d in job.inputs} - produced)
    reopened = {
        name: n
        for name in sources
        if (n := _count(lineage, pipeline.namespace, ingest_job(name), Status.RESUBMIT))
    }
    waiting = "".join(
        f"; {n} reopened lots of the source {name} wait for `lotline ingest -d {name} …` to re-register them"
        for name, n in reopened.items()
    )
    for job in jobs:
        if given_up := lineage.lots.given_up(pipeline.namespace, job.name):
            most = max(given_up.values())
            waiting += (
                f"; {len(given_up)} failed lots of {job.name} given up on ({gave_up_line(most)}): "
                f"`lotline retry {job.name}` retries them"
            )
    named = ", ".join(j.name for j in jobs)
    return (
        f"no eligible lots for {named}{over}: {counts or 'no lots yet'}{stale}{waiting}; "
        "Spark was not started (new input lots, `lotline invalidate` or `lotline backfill` make "
        "lots eligible)"
    )


def stale_lots(lineage: Lineage, pipeline: Pipeline, jobs: list[JobSpec]) -> list[tuple[int, str]]:
    """Each job's stale lots (made by an older version of it), counted, and in a line with the command
    that remakes them: ``313 lots of hourly are stale (made by version 1, now 2): `lotline backfill
    …` remakes them``."""
    found = []
    for job in jobs:
        runs, span = lineage.gaps.stale(pipeline.namespace, job.name)
        if not runs:
            continue
        count = sum(r.count for r in runs)
        made = "; ".join(sorted({r.made.line for r in runs if r.made is not None}))
        remake = (
            "" if span is None else f": `{backfill_command(pipeline.namespace, job.name, span)}` remakes them"
        )
        lots = f"1 lot of {job.name} is" if count == 1 else f"{count} lots of {job.name} are"
        found.append((count, f"{lots} stale ({made}){remake}"))
    return found


def backfill_command(namespace: str, job: str, span: TimeRange) -> str:
    """The command that remakes a job's stale lots of ``span``, as it can be typed."""
    at = "%Y-%m-%dT%H:%M:%SZ"
    named = " ".join(shlex.quote(part) for part in ("-n", namespace, "--job", job))
    return f"{lotline_command()} backfill {named} --from {span.start:{at}} --to {span.end:{at}} --only stale"


def _count(lineage: Lineage, namespace: str, job: str, status: Status) -> int:
    """The job's output lots in ``status`` (0 for a job lotline does not know)."""
    try:
        return lineage.lots.counts(namespace, job).get(status, 0)
    except LotlineError:
        return 0


def run_with_progress(
    runner: LotRunner,
    jobs: list[JobSpec],
    *,
    workers: int = 1,
    retries: int = 0,
    window: Window | None = None,
    quiet: bool = False,
) -> RunSummary:
    """``run_pipeline`` with a live line per job on stderr (lots done and failed, time)."""
    worker = f"{socket.gethostname()}:{os.getpid()}"
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TextColumn("{task.completed} done"),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=quiet,
        transient=True,
    ) as progress:
        tasks = {j.name: progress.add_task(j.name, total=None, failed=0) for j in jobs}
        failed: dict[str, int] = dict.fromkeys(tasks, 0)

        def show(result: LotResult) -> None:
            if result.ok:
                progress.advance(tasks[result.job])
            elif result.reason != INTERRUPTED:  # the summary lists the lots Ctrl-C stopped
                failed[result.job] += 1
                progress.update(tasks[result.job], failed=failed[result.job])
                progress.console.print(f"failed: {result.error}", style="red", highlight=False)

        return run_pipeline(
            runner, jobs, worker=worker, workers=workers, retries=retries, window=window, on_result=show
        )


def _print_plan(pipeline: Pipeline, jobs: list[JobSpec], as_json: bool) -> None:
    plan: list[dict[str, Any]] = [
        {
            "job": j.name,
            "inputs": [d.name for d in j.inputs],
            "output": j.output.name,
            **({"outputs": [d.name for d in j.outputs]} if len(j.outputs) > 1 else {}),
            "lotMapping": j.lot_mapping,
            "location": j.location,
            "codeDigest": j.code_digest,
        }
        for j in jobs
    ]
    if as_json:
        print(
            json.dumps({"pipeline": pipeline.name, "namespace": pipeline.namespace, "jobs": plan}, indent=2)
        )
        return
    print(f"pipeline {pipeline.name} (namespace {pipeline.namespace}): {len(jobs)} jobs, in order")
    for step in plan:
        mapping = f" [{step['lotMapping']}]" if step["lotMapping"] else ""
        outputs = ", ".join(step.get("outputs", [step["output"]]))
        print(f"  {step['job']}: {', '.join(step['inputs'])} -> {outputs}{mapping}")


def print_summary(pipeline: Pipeline, summary: RunSummary, as_json: bool) -> None:
    rows = [
        {
            "job": name,
            "done": t.done,
            "failed": t.failed,
            "retried": t.retried,
            "skipped": t.skipped,
            "held": t.held,
            "seconds": round(t.seconds, 3),
        }
        for name, t in summary.tallies.items()
    ]
    if as_json:
        document = {
            "pipeline": pipeline.name,
            "namespace": pipeline.namespace,
            "jobs": rows,
            "interrupted": summary.interrupted,
        }
        print(
            json.dumps(
                {**document, "errors": summary.errors, "held": summary.held, "warnings": summary.warnings},
                indent=2,
            )
        )
        return
    table = Table(title=f"lotline run {pipeline.name}")
    counts = ("job", "done", "failed", "retried", "skipped", "held")
    for column in (*counts, "time"):
        table.add_column(column, justify="left" if column == "job" else "right")
    for row in rows:
        table.add_row(*(str(row[k]) for k in counts), f"{row['seconds']:.1f}s")
    console = Console()
    console.print(table)
    for error in summary.errors:
        console.print(f"[red]left failed:[/red] {error}", highlight=False)
    for held in summary.held:
        console.print(f"[yellow]not taken:[/yellow] {held}", highlight=False, soft_wrap=True)
    for warning in summary.warnings:
        console.print(
            f"[yellow]published with a warning:[/yellow] {warning}", highlight=False, soft_wrap=True
        )
    if summary.interrupted:
        console.print("[red]interrupted[/red]: the run stopped at Ctrl-C", highlight=False)
