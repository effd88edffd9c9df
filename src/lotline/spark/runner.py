"""Executing one lot: read its inputs' manifests, transform, write the attempt, commit or fail.

The claim (made by the caller) created and started the run; this module ends it, through the
services only: ``lots.complete`` publishes the manifest of what was actually written with the
run's facets, ``lots.fail`` records the error and what the attempt wrote (which is then removed).
While Spark works, the runner's heartbeat thread (``heartbeats.py``) keeps the claim, so a live
worker keeps its lot.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from lotline.domain.checks import CHECKS_FACET, raise_failures, run_summary
from lotline.domain.coordination import LotClaim
from lotline.domain.errors import Conflict, DatabaseUnavailable, InvalidInput
from lotline.domain.failures import INTERRUPTED, Failure
from lotline.domain.lots import IntervalLot, parse_lot
from lotline.domain.manifests import Manifest, ManifestDraft, ManifestObject, object_change
from lotline.domain.model import FieldSpec
from lotline.domain.runs import LOG_FACET
from lotline.services import Lineage
from lotline.services import facets as ol
from lotline.services.emission import LotEnd
from lotline.services.lots import DEFAULT_LEASE, OutputWritten
from lotline.services.outage import Outage, retried
from lotline.spark.capture import WriteCapture, WriteReport
from lotline.spark.checks import Gate, check_conditions
from lotline.spark.connect import is_connect
from lotline.spark.connect_capture import ConnectCapture
from lotline.spark.failures import failure_of
from lotline.spark.frames import empty_frame, read_objects
from lotline.spark.heartbeats import Heartbeats
from lotline.spark.parts import write_parts
from lotline.spark.pipeline import DatasetSpec, JobSpec, Lot, Pipeline
from lotline.spark.reads import column_lineage_facet, name_reads, undeclared
from lotline.spark.runlog import RunLog
from lotline.spark.session import application, check_storage, quiet_query_context_logs, ship_code
from lotline.spark.tables import CatalogTables, TableSync, declared_tables
from lotline.spark.written import Written, verdicts_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
#: Spark jobs take minutes; a lease of a minute, beaten every 20 s, lets a dead worker's lot go soon.
RUNNER_LEASE = max(DEFAULT_LEASE, timedelta(seconds=60))
#: Tries to record a lot's failure (waits of 0.5, 1, 2, 4, 8 s between them: within the lease).
FAIL_TRIES = 6
#: How long Ctrl-C waits for Spark to take the cancellation before stopping anyway.
_CANCEL_WAIT_S = 10


@dataclass(frozen=True)
class LotResult:
    """How one attempt at one lot ended."""

    job: str
    lot: str
    attempt: int
    run_id: uuid.UUID
    ok: bool
    seconds: float
    rows: int | None = None
    files: int = 0
    #: A failure as "job J lot L (attempt N): <reason>" (the summary's line).
    error: str | None = None
    #: A failure's one-line reason alone (``spark/failures.py``), as recorded in ``runs.error``.
    reason: str | None = None
    #: The ``warn`` checks that did not hold on the published lot: (check, failing rows or None).
    warnings: tuple[tuple[str, int | None], ...] = ()


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a lot: the lot was failed cleanly (``result``: ``interrupted by the user``);
    the run stops."""

    def __init__(self, result: LotResult) -> None:
        super().__init__(result.error)
        self.result = result


#: The run facet that lists what the lineage capture could not read (Spark Connect only).
CAPTURE_FACET = "lotline_capture"


class LotRunner:
    """Runs a pipeline's lots on one SparkSession; safe to share between claim loops (threads)."""

    def __init__(
        self,
        lineage: Lineage,
        pipeline: Pipeline,
        spark: SparkSession,
        *,
        lease: timedelta = RUNNER_LEASE,
        quiet: bool = True,
    ) -> None:
        """``quiet`` (lotline's default log level; ``--verbose`` is not): silence Spark's log at
        Ctrl-C and PySpark's query-context records (``quiet_query_context_logs``). A warehouse
        Spark cannot write (``s3://`` without hadoop-aws) is refused here, before any claim."""
        check_storage(spark, lineage.storage.root)
        if quiet:  # before check_conditions: on Spark Connect it asks the server's analyzer
            quiet_query_context_logs()
        check_conditions(spark, pipeline)
        tables = declared_tables(pipeline)
        if tables and is_connect(spark):
            # Their partitions are read from the driver's catalog (tables.py), which is the server's.
            raise InvalidInput(
                f"dataset {min(tables)}: catalog tables (table=) are not supported on Spark Connect yet; "
                "read the dataset with lotline.read, or run on a classic master."
            )
        self.lineage = lineage
        self.pipeline = pipeline
        self.spark = spark
        self.lease = lease
        self.quiet = quiet
        self._connected = is_connect(spark)
        self._capture: WriteCapture | ConnectCapture = (
            ConnectCapture(spark) if self._connected else WriteCapture.for_session(spark)
        )
        self._heartbeats = Heartbeats(lineage, lease)
        # The Spark application's facets, the same for each lot (each is a py4j call to read).
        self._engine = ol.processing_engine("spark", spark.version)
        self._application = ol.custom(**application(spark))
        ship_code(pipeline, spark)
        self._lock = threading.Lock()
        self._interrupted = threading.Event()
        #: What was last recorded of each output dataset: (fields, columnLineage facet).
        self._recorded: dict[str, tuple[tuple[FieldSpec, ...], dict[str, Any] | None]] = {}
        self._tables = CatalogTables(spark, lineage, pipeline.namespace, tables)

    def sync_tables(self) -> dict[str, TableSync]:
        """Reconcile the pipeline's catalog tables with the READY lots (``tables.sync_table``): when
        a run starts, so that lots reopened or published while no runner ran are right."""
        return self._tables.sync({d.name: d.options for d in self.pipeline.datasets.values()})

    def follow_tables(self) -> int:
        """Move the tables' partitions of the lots the lot event log names since the last sync or
        follow (``tables.CatalogTables.follow``): what other workers and operators changed."""
        return self._tables.follow()

    @property
    def namespace(self) -> str:
        return self.pipeline.namespace

    @property
    def interrupted(self) -> bool:
        return self._interrupted.is_set()

    def interrupt(self) -> None:
        """Ctrl-C: cancel Spark's jobs; the lots they belonged to fail as ``interrupted by the user``
        (not as Spark's "job cancelled") and raise ``Interrupted``, so every claim loop stops. Safe in
        a signal handler: Spark is called from a thread of its own (this one may be inside py4j).
        Spark's log is silenced first, unless asked for (it logs every cancelled task as an ERROR)."""
        self._interrupted.set()
        spark = self.spark

        def cancel() -> None:
            if self._connected:  # the server's operations of this session (its log is the server's)
                spark.interruptAll()
                return
            if self.quiet:
                spark.sparkContext.setLogLevel("OFF")
            spark.sparkContext.cancelAllJobs()

        thread = threading.Thread(target=cancel, name="lotline interrupt", daemon=True)
        thread.start()
        thread.join(timeout=_CANCEL_WAIT_S)

    def claim(self, worker: str, job: JobSpec, skip: Container[str] = ()) -> LotClaim | None:
        return self.lineage.lots.claim(worker, self.namespace, job.name, lease=self.lease, skip=skip)

    def execute(self, job: JobSpec, claim: LotClaim) -> LotResult:
        """Run the claimed lot to its end (complete or fail); never raises for the lot's own errors."""
        started = time.monotonic()
        facets = self._facets(claim)
        #: Each output's attempt folder, once anything may have been written there (a failure
        #: records what each holds, and it is removed).
        locations: dict[str, str] = {}
        run_log = RunLog(job.name)
        emission = self.lineage.emission
        start_facets = {"processing_engine": dict(self._engine), **facets}
        started_event = False
        try:
            with self._heartbeats.beating(claim) as beat:
                inputs = self.lineage.lots.read_inputs(claim)
                emission.started(claim, start_facets, inputs.upstream)
                started_event = True
                objects = self._input_objects(job, claim, inputs.manifests)
                context = self._context(job, claim, run_log.logger)
                written = self._produce(job, claim, objects, locations, facets, context)
                gaps = sorted({gap for w in written.values() for gap in w.not_captured})
                if gaps:  # said, never guessed: the lineage facets hold only what was resolved
                    facets[CAPTURE_FACET] = ol.custom(notCaptured=gaps)
                # Checks gate the commit: a failing `fail` check on any output fails the lot like
                # any error (no output is published).
                verdicts = verdicts_of(written)
                if verdicts:
                    facets[CHECKS_FACET] = ol.custom(**run_summary(verdicts, several=job.several))
                    raise_failures(verdicts, several=job.several)
                beat.check()
                _add_log(facets, run_log)
                facets["lotline_output"] = ol.custom(**_output_statistics(written[job.output.name].draft))
                ending = self._completion(job, claim, written, facets)
                self._publish(job, claim, written, facets, ending)
        except BaseException as error:
            if not started_event:  # the inputs could not be read: the START names no upstream runs
                emission.started(claim, start_facets)
            _add_log(facets, run_log)
            stopped = isinstance(error, KeyboardInterrupt) or self.interrupted
            failure = failure_of(error)
            if stopped:
                failure = replace(failure, reason=INTERRUPTED)
            self._fail(job, claim, locations, failure, facets)
            emission.failed(claim, failure, facets)
            message = f"job {job.name} lot {claim.lot} (attempt {claim.attempt}): {failure.reason}"
            result = _result(job, claim, started, ok=False, error=message, reason=failure.reason)
            if stopped:
                raise Interrupted(result) from None  # the lot is failed cleanly; the run stops
            if not isinstance(error, Exception):
                raise  # SystemExit and the like: the lot is failed cleanly, then the process ends
            return result
        emission.ended(ending)  # committed with its lineage: the COMPLETE is posted to any consumer
        for spec in (s for s in job.outputs if s.table is not None):  # not the database: right after
            draft = written[spec.name].draft
            self._tables.published(spec.name, claim.lot, draft.objects, draft.location)
        claim_output = written[job.output.name].draft
        warned = tuple((w.name, w.failed) for v in verdicts_of(written).values() for w in v.warnings)
        return _result(
            job,
            claim,
            started,
            ok=True,
            rows=claim_output.row_count,
            files=len(claim_output.objects),
            warnings=warned,
        )

    def _produce(
        self,
        job: JobSpec,
        claim: LotClaim,
        objects: dict[str, list[ManifestObject]],
        locations: dict[str, str],
        facets: dict[str, Any],
        context: Lot,
    ) -> dict[str, Written]:
        """Each output's attempt, by output: empty when every input lot is empty, else written
        (``locations`` gets each attempt folder as it may be written to), or written part by part."""
        storage = self.lineage.storage
        attempts = {
            spec.name: storage.attempt_uri(self.namespace, spec.name, claim.lot, claim.attempt)
            for spec in job.outputs
        }
        if not any(objects.values()):  # every input lot is empty: so are the output lots
            return {name: Written(ManifestDraft(attempt, (), 0), ()) for name, attempt in attempts.items()}
        if job.partition_by is None:
            locations.update(attempts)
            return self._write(job, claim, objects, locations, context)
        write = partial(self._write, job, claim)
        return write_parts(self.lineage, job, claim, objects, facets, context, bases=attempts, write=write)

    # -- publishing every output of the lot (one transaction) ---------------------------------
    def _completion(
        self, job: JobSpec, claim: LotClaim, written: Mapping[str, Written], facets: dict[str, Any]
    ) -> LotEnd:
        """The lot's COMPLETE event (and its START) to journal with its commit, every output with
        its draft and dataset facets; a job with several outputs reports each in the
        ``lotline_outputs`` run facet."""
        if len(job.outputs) > 1:
            facets["lotline_outputs"] = ol.custom(
                outputs=[{"dataset": name, **_output_statistics(w.draft)} for name, w in written.items()]
            )
        return self.lineage.emission.completion(
            claim,
            {
                spec.name: (written[spec.name].draft, self._dataset_facets(spec.name, written[spec.name]))
                for spec in job.outputs
            },
            run_facets=facets,
        )

    def _publish(
        self,
        job: JobSpec,
        claim: LotClaim,
        written: Mapping[str, Written],
        facets: dict[str, Any],
        ending: LotEnd,
    ) -> None:
        """Complete the lot: every output's manifest and version facets, and the run's START and
        COMPLETE events, in the one transaction of ``LotService.complete`` — all outputs become
        readable together with their lineage, or none does."""
        self.lineage.lots.complete(
            claim,
            outputs={
                spec.name: OutputWritten(written[spec.name].draft, written[spec.name].version_facets())
                for spec in job.outputs
            },
            facets=facets,
            journal=ending.journal,
        )

    def _record_output(
        self,
        spec: DatasetSpec,
        claim: LotClaim,
        output: DataFrame,
        report: WriteReport | None,
        given: dict[str, str],
    ) -> tuple[FieldSpec, ...]:
        """What the write's plan shows: reads the job did not declare become inputs of the run (and
        of its job, in lineage); the output's columns become the dataset's fields and their sources
        its ``columnLineage`` facet, written when they change."""
        if report is not None and report.fields is not None:  # as the listener read them, in its call
            fields = tuple(FieldSpec(name, type_) for name, type_ in report.fields)
        else:
            fields = tuple(FieldSpec(f.name, f.dataType.simpleString()) for f in output.schema.fields)
        facet = None
        if report is not None and report.plan is not None:
            named = name_reads(report.plan.reads, given, self.pipeline, self.lineage.storage)
            reads = undeclared(named)
            if reads:
                self.lineage.catalog.record_reads(claim.run_id, reads)
            facet = column_lineage_facet(report.plan, named)
        with self._lock:
            if self._recorded.get(spec.name) == (fields, facet):
                return fields
            self._recorded[spec.name] = (fields, facet)
        self.lineage.catalog.upsert_dataset(
            self.namespace,
            spec.name,
            physical_name=self.lineage.storage.dataset_uri(self.namespace, spec.name),
            fields=fields,
            facets={"columnLineage": facet} if facet is not None else None,
        )
        return fields

    def _dataset_facets(self, dataset: str, written: Written) -> dict[str, Any]:
        """An output's ``schema``, ``columnLineage`` and quality facets, as the COMPLETE event carries
        them."""
        found: dict[str, Any] = dict(ol.quality_facets(written.verdict))
        if written.fields:
            found["schema"] = ol.schema(written.fields)
        with self._lock:
            recorded = self._recorded.get(dataset)
        if recorded is not None and recorded[1] is not None:
            found["columnLineage"] = recorded[1]
        return found

    def _input_objects(
        self, job: JobSpec, claim: LotClaim, readable: Mapping[str, Mapping[str, Manifest]]
    ) -> dict[str, list[ManifestObject]]:
        """Each input's objects: exactly those its lots' current manifests list (``readable``, as
        ``LotService.read_inputs`` found them; a mapped job: the union of its input lots)."""
        lots: dict[str, list[str]] = defaultdict(list)
        for dataset, lot in claim.input_lots:
            lots[dataset].append(lot)
        objects: dict[str, list[ManifestObject]] = {}
        for spec in job.inputs:
            manifests = readable.get(spec.name, {})
            unreadable = [lot for lot in lots[spec.name] if lot not in manifests]
            if unreadable:
                raise InvalidInput(
                    f"input {spec.name} lot {unreadable[0]} is READY but has no manifest to read "
                    "(it was produced outside lotline's storage)."
                )
            for lot in lots[spec.name]:
                self._check_unchanged(spec.name, lot, manifests[lot].objects)
            objects[spec.name] = [o for lot in lots[spec.name] for o in manifests[lot].objects]
        return objects

    def _check_unchanged(self, dataset: str, lot: str, objects: Sequence[ManifestObject]) -> None:
        """Each object is as its manifest recorded it (size, modified time: one stat each): a file
        replaced after an in-place ingest must fail the lot, never be read as if it were the lot."""
        storage = self.lineage.storage
        for recorded in objects:
            found = storage.stat(recorded.uri)
            change = object_change(
                recorded, None if found is None else found.size, None if found is None else found.modified_at
            )
            if change is None:
                continue
            inside = recorded.uri.startswith(storage.root.rstrip("/") + "/")
            remedy = (
                "it was changed outside lotline: invalidate the lot (`lotline invalidate`) to recompute it"
                if inside
                else "run `lotline ingest` to register the new version"
            )
            raise Conflict(
                f"input {dataset} lot {lot}: {storage.local_path(recorded.uri)} changed since it was "
                f"registered ({change}); {remedy}."
            )

    def _write(
        self,
        job: JobSpec,
        claim: LotClaim,
        objects: Mapping[str, Sequence[ManifestObject]],
        locations: Mapping[str, str],
        context: Lot,
    ) -> dict[str, Written]:
        """Transform DataFrames over ``objects`` and write each output to its own attempt folder
        (``locations``), one after the other: by output, the draft of what was written (Spark's row
        count), its fields and (the first output) the checks' verdict. Nothing is readable until
        ``_publish`` commits them all."""
        frames = {
            d.name: read_objects(self.spark, d, [o.uri for o in objects[d.name]])
            if objects[d.name]
            else empty_frame(self.spark, d, job.name)
            for d in job.inputs
        }
        results = job.call(frames, context)
        given = {o.uri: dataset for dataset, listed in objects.items() for o in listed}
        return {
            spec.name: self._write_output(
                job, spec, claim, results[spec.name], locations[spec.name], given, context
            )
            for spec in job.outputs
        }

    def _write_output(
        self,
        job: JobSpec,
        spec: DatasetSpec,
        claim: LotClaim,
        output: DataFrame,
        location: str,
        given: dict[str, str],
        context: Lot,
    ) -> Written:
        """Write one output's DataFrame to its attempt folder: what was written, its fields, and the
        verdict of that output's checks."""
        gate = Gate.over(output, job, spec.name)
        frame = gate.frame
        report = self._capture.write(frame, spec, location, gate)
        written = self.lineage.storage.describe_written(location, format=spec.format)  # as Spark reports
        fields = self._record_output(spec, claim, frame, report, given)
        gaps = tuple(self._capture.not_captured(location))
        rows = report.rows if report else None
        verdict = None
        if gate.observation is not None:
            observed = report.observed if report else {}
            reader = lambda: read_objects(self.spark, spec, [o.uri for o in written])  # noqa: E731
            verdict = gate.verdict(observed, reader, context)
        return Written(ManifestDraft(location, written, rows), fields, verdict, gaps)

    def _context(self, job: JobSpec, claim: LotClaim, log: logging.Logger) -> Lot:
        parsed = parse_lot(claim.lot)
        window = (parsed.start, parsed.end) if isinstance(parsed, IntervalLot) else (None, None)
        return Lot(
            id=claim.lot,
            start=window[0],
            end=window[1],
            inputs=claim.input_lots,
            run_id=claim.run_id,
            attempt=claim.attempt,
            spark=self.spark,
            log=log,
        )

    def _facets(self, claim: LotClaim) -> dict[str, Any]:
        return {
            **ol.lot_facets(claim.lot),
            "lotline_lot": ol.custom(
                lot=claim.lot,
                attempt=claim.attempt,
                worker=claim.owner,
                inputLots=[{"dataset": d, "lot": lot} for d, lot in claim.input_lots],
            ),
            "spark_applicationDetails": dict(self._application),
        }

    def _fail(
        self,
        job: JobSpec,
        claim: LotClaim,
        locations: Mapping[str, str],
        failure: Failure,
        facets: Mapping[str, Any],
    ) -> None:
        """Fail the run with the failure; what the attempt wrote to each output's folder is
        recorded (one partial manifest per output), then removed."""
        drafts: dict[str, ManifestDraft] = {}
        for spec in job.outputs:
            location = locations.get(spec.name)
            if location is not None:
                written = self.lineage.storage.describe_written(location, format=spec.format)
                drafts[spec.name] = ManifestDraft(location, written)
        outputs = {name: OutputWritten(draft) for name, draft in drafts.items()}

        def record() -> None:
            self.lineage.lots.fail(claim, outputs=outputs, error=failure, facets=dict(facets))

        try:
            # A failure whose transaction the database gave up on (a deadlock's victim, a restart)
            # is tried again for about 15 s, well within the lease the last heartbeat left.
            retried(record, Outage(log.warning), FAIL_TRIES)
        except Conflict as refused:
            # The claim is no longer ours (reaped or invalidated): its run was already failed. So
            # is a retried failure whose first commit went through but whose answer was lost.
            log.info("job %s lot %s: %s", job.name, claim.lot, refused.message)
        except DatabaseUnavailable as down:
            log.warning(
                "job %s lot %s: the failure could not be recorded (%s); the lot is reaped after its lease",
                job.name,
                claim.lot,
                down.detail,
            )
        except Exception:
            # E.g. the database is unreachable: the lease runs out and the reaper fails the lot.
            log.exception("job %s lot %s: the failure could not be recorded", job.name, claim.lot)


def _output_statistics(draft: ManifestDraft) -> dict[str, Any]:
    """What the attempt wrote for an output, and where (the ``lotline_output`` run facet's fields)."""
    return {
        "rowCount": draft.row_count,
        "fileCount": len(draft.objects),
        "size": sum(o.size for o in draft.objects),
        "location": draft.location,
    }


def _add_log(facets: dict[str, Any], run_log: RunLog) -> None:
    kept = run_log.facet()
    if kept is not None:
        facets[LOG_FACET] = ol.custom(**kept)


def _result(job: JobSpec, claim: LotClaim, started: float, *, ok: bool, **more: Any) -> LotResult:
    seconds = time.monotonic() - started
    return LotResult(job.name, claim.lot, claim.attempt, claim.run_id, ok=ok, seconds=seconds, **more)
