"""``lotline worker PIPELINE``: claim and run the pipeline's lots until stopped (docs/pipelines.md)."""

from __future__ import annotations

import os
import signal
import socket
import threading
from datetime import timedelta
from types import FrameType
from typing import Annotated

import typer

from lotline.cli.run import (
    DEFAULT_LEASE_S,
    QUIET_LEVELS,
    JobsOption,
    LeaseOption,
    PipelineArgument,
    VerboseOption,
    quiet_py4j,
    with_verbosity,
)
from lotline.services import open_configured
from lotline.services.config import load_settings
from lotline.spark.registration import register
from lotline.spark.runner import LotResult, LotRunner
from lotline.spark.session import check_master, load_pipeline_with_spark, spark_session
from lotline.spark.worker import DEFAULT_POLL_S, Worker


def worker(
    pipeline: PipelineArgument,
    job: JobsOption = None,
    lease: LeaseOption = DEFAULT_LEASE_S,
    poll: Annotated[
        float, typer.Option(min=0.1, help="Longest wait between looks for work when nothing wakes it.")
    ] = DEFAULT_POLL_S,
    idle_exit: Annotated[
        float | None, typer.Option(min=0, help="Exit after this many seconds without eligible lots.")
    ] = None,
    verbose: VerboseOption = False,
) -> None:
    """Run the pipeline's lots as they become eligible, until SIGTERM or SIGINT: the lot in progress
    is finished first (a second signal fails it cleanly, nothing half-written visible), then exit 0."""
    settings = with_verbosity(load_settings(), verbose)
    loaded = load_pipeline_with_spark(settings, pipeline)
    jobs = loaded.select(job) if job else loaded.ordered_jobs()
    check_master(settings.spark_master)
    stop = threading.Event()
    runner: LotRunner | None = None

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():  # second signal: fail the lot in progress cleanly, then end
            if runner is not None:
                runner.interrupt()
            raise KeyboardInterrupt
        stop.set()
        print("lotline worker: stopping after the lot in progress (signal again to fail it now)", flush=True)

    name = f"{socket.gethostname()}:{os.getpid()}"
    with open_configured(settings) as lineage:
        try:
            register(lineage, loaded)
            with spark_session(settings, f"lotline worker {loaded.name}") as spark, quiet_py4j():
                # After the session: PySpark's own SIGINT handler would only cancel Spark's jobs.
                for signum in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(signum, on_signal)
                runner = LotRunner(
                    lineage,
                    loaded,
                    spark,
                    lease=timedelta(seconds=lease),
                    quiet=settings.log_level in QUIET_LEVELS,
                )
                print(f"lotline worker {name}: {', '.join(j.name for j in jobs)}", flush=True)
                tally = Worker(runner, jobs, name=name, poll=poll, on_result=_print).run(stop, idle_exit)
                done = f"{tally.done} lots done, {tally.failed} failed"
                print(f"lotline worker {name}: stopped; {done}", flush=True)
        except KeyboardInterrupt:
            print("lotline worker: stopped during a lot (it was failed cleanly)", flush=True)


def _print(result: LotResult) -> None:
    outcome = "done" if result.ok else f"FAILED: {result.reason}"
    print(
        f"{result.job} {result.lot} attempt {result.attempt}: {outcome} ({result.seconds:.1f} s)", flush=True
    )
