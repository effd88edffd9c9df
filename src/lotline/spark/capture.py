"""What each write of a lot read and wrote, from Spark itself: a ``QueryExecutionListener``.

A py4j ``QueryExecutionListener`` sees every query the session finishes; for a file write the
analyzed plan is an ``InsertIntoHadoopFsRelationCommand``: its executed plan carries the write's
``numOutputRows``, ``numOutputBytes`` and ``numFiles`` (row counts without a second pass over the
data), and its query's plan the files actually read and where each written column comes from
(``spark.plans``) — dynamic lineage, seed 003. Other queries (schema inference, ``head``,
``collect``) are not writes and are ignored. The listener is called asynchronously (on Spark's
listener bus, through the py4j callback server), so a writer waits for the report of its own
output path; that also attributes every report to its lot when several lots share the session.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from lotline.spark.plans import WritePlan, write_plan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
WRITE_COMMAND = "InsertIntoHadoopFsRelationCommand"
#: How long a writer waits for the listener's report before recording no row count.
REPORT_TIMEOUT_S = 30.0


_REGISTERING = threading.Lock()
#: Spark application id -> its listener's reports.
_LISTENING: dict[str, WriteCapture] = {}


@dataclass(frozen=True)
class WriteReport:
    """One write as Spark saw it; a figure Spark did not report is None."""

    rows: int | None
    bytes: int | None
    files: int | None
    plan: WritePlan | None
    #: The write's ``DataFrame.observe`` metrics by name (a job's checks: ``spark/checks.py``).
    observed: dict[str, dict[str, Any]] = field(default_factory=dict)


def path_key(uri: str) -> str:
    """``file:/x``, ``file:///x`` and ``/x`` name one folder; ``s3a://b/k`` and ``s3://b/k`` one key."""
    parsed = urlparse(uri)
    return f"{parsed.netloc}{parsed.path}".rstrip("/")


class WriteCapture:
    """The session's write reports by output path; one listener per session (``for_session``)."""

    def __init__(self) -> None:
        self._reports: dict[str, WriteReport] = {}
        self._arrived = threading.Condition()

    @classmethod
    def for_session(cls, spark: SparkSession) -> WriteCapture:
        """The listener of the Spark application, registered on first use (Spark keeps it until it
        stops; a restarted application has a new id and gets a new one)."""
        from pyspark.java_gateway import ensure_callback_server_started

        application = spark.sparkContext.applicationId
        with _REGISTERING:
            if application not in _LISTENING:
                capture = cls()
                gateway = spark.sparkContext._gateway
                if gateway is None:
                    raise RuntimeError(
                        f"Spark application {application} has no py4j gateway to report writes on"
                    )
                ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
                spark._jsparkSession.listenerManager().register(_Listener(capture))
                _LISTENING[application] = capture
            return _LISTENING[application]

    def written(self, location: str, timeout: float = REPORT_TIMEOUT_S) -> WriteReport | None:
        """The report of the write to ``location``; None if Spark did not report it in time."""
        key = path_key(location)
        with self._arrived:
            if not self._arrived.wait_for(lambda: key in self._reports, timeout):
                log.warning("Spark reported nothing of the write to %s; its lineage is unknown", location)
                return None
            return self._reports.pop(key)

    def report(self, path: str, report: WriteReport) -> None:
        with self._arrived:
            self._reports[path_key(path)] = report
            self._arrived.notify_all()


def _write_node_metrics(node: Any) -> Any:
    """The metrics of the plan's ``DataWritingCommandExec``: under adaptive execution it sits in the
    final plan of an ``AdaptiveSparkPlanExec``, inside a query stage."""
    kind = node.getClass().getSimpleName()
    if kind == "DataWritingCommandExec":
        return node.metrics()
    if kind == "AdaptiveSparkPlanExec":
        return _write_node_metrics(node.executedPlan())
    if kind.endswith("QueryStageExec"):
        return _write_node_metrics(node.plan())
    children = node.children()
    for index in range(children.size()):
        found = _write_node_metrics(children.apply(index))
        if found is not None:
            return found
    return None


def _metric(metrics: Any, name: str) -> int | None:
    if metrics is None or not metrics.contains(name):
        return None
    return int(metrics.get(name).get().value())


def _observed(qe: Any) -> dict[str, dict[str, Any]]:
    """``QueryExecution.observedMetrics``: each named observation's row as a dict (one look when none)."""
    metrics = qe.observedMetrics()
    if metrics.isEmpty():
        return {}
    found: dict[str, dict[str, Any]] = {}
    entries = metrics.iterator()
    while entries.hasNext():
        entry = entries.next()
        row = entry._2()
        names = list(row.schema().fieldNames())
        found[str(entry._1())] = {name: row.get(index) for index, name in enumerate(names)}
    return found


class _Listener:
    """The Java side calls these; anything raised here would only be logged by py4j, so nothing is."""

    def __init__(self, capture: WriteCapture) -> None:
        self._capture = capture

    def onSuccess(self, funcName: str, qe: Any, durationNs: int) -> None:
        try:
            command = qe.analyzed()
            if command.getClass().getSimpleName() != WRITE_COMMAND:
                return  # reads, schema inference and other internal queries
            output = command.outputPath().toString()
            metrics = _write_node_metrics(qe.executedPlan())
        except Exception:
            log.exception("could not read a Spark write")
            return
        try:
            plan: WritePlan | None = write_plan(command)
        except Exception:
            log.exception("could not read the plan of the write to %s; its reads are unknown", output)
            plan = None
        rows, size, files = (_metric(metrics, n) for n in ("numOutputRows", "numOutputBytes", "numFiles"))
        try:
            observed = _observed(qe)
        except Exception:
            log.exception("could not read the observed metrics of the write to %s", output)
            observed = {}
        report = WriteReport(rows=rows, bytes=size, files=files, plan=plan, observed=observed)
        self._capture.report(output, report)

    def onFailure(self, funcName: str, qe: Any, exception: Any) -> None:
        """A failed write raises in the writer itself; there is nothing to count."""

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]  # noqa: RUF012
