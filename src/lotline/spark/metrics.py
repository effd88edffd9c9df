"""Row counts of writes from Spark's own metrics, not from a second pass over the data.

A py4j ``QueryExecutionListener`` sees every query the session finishes; for a file write the
analyzed plan is an ``InsertIntoHadoopFsRelationCommand`` whose executed plan carries
``numOutputRows``. The listener is called asynchronously (on Spark's listener bus, through the
py4j callback server), so a writer waits for the report of its own output path.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
WRITE_COMMAND = "InsertIntoHadoopFsRelationCommand"
#: How long a writer waits for the listener's report before recording no row count.
REPORT_TIMEOUT_S = 30.0


_REGISTERING = threading.Lock()
#: Spark application id -> its listener's reports.
_LISTENING: dict[str, WriteMetrics] = {}


def _path_key(uri: str) -> str:
    """``file:/x``, ``file:///x`` and ``/x`` name one folder; ``s3a://b/k`` and ``s3://b/k`` one key."""
    parsed = urlparse(uri)
    return f"{parsed.netloc}{parsed.path}".rstrip("/")


class WriteMetrics:
    """The session's write reports by output path; one listener per session (``for_session``)."""

    def __init__(self) -> None:
        self._reports: dict[str, int | None] = {}
        self._arrived = threading.Condition()

    @classmethod
    def for_session(cls, spark: SparkSession) -> WriteMetrics:
        """The listener of the Spark application, registered on first use (Spark keeps it until it
        stops; a restarted application has a new id and gets a new one)."""
        from pyspark.java_gateway import ensure_callback_server_started

        application = spark.sparkContext.applicationId
        with _REGISTERING:
            if application not in _LISTENING:
                metrics = cls()
                gateway = spark.sparkContext._gateway
                assert gateway is not None
                ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
                spark._jsparkSession.listenerManager().register(_Listener(metrics))
                _LISTENING[application] = metrics
            return _LISTENING[application]

    def rows_written(self, location: str, timeout: float = REPORT_TIMEOUT_S) -> int | None:
        """``numOutputRows`` of the write to ``location``; None if Spark did not report it in time."""
        key = _path_key(location)
        with self._arrived:
            if not self._arrived.wait_for(lambda: key in self._reports, timeout):
                log.warning("Spark reported no metrics for the write to %s; row count unknown", location)
                return None
            return self._reports.pop(key)

    def report(self, path: str, rows: int | None) -> None:
        with self._arrived:
            self._reports[_path_key(path)] = rows
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


class _Listener:
    """The Java side calls these; anything raised here would only be logged by py4j, so nothing is."""

    def __init__(self, metrics: WriteMetrics) -> None:
        self._metrics = metrics

    def onSuccess(self, funcName: str, qe: Any, durationNs: int) -> None:
        try:
            plan = qe.analyzed()
            if plan.getClass().getSimpleName() != WRITE_COMMAND:
                return  # reads, schema inference and other internal queries
            metrics = _write_node_metrics(qe.executedPlan())
            rows = None
            if metrics is not None and metrics.contains("numOutputRows"):
                rows = int(metrics.get("numOutputRows").get().value())
            self._metrics.report(plan.outputPath().toString(), rows)
        except Exception:
            log.exception("could not read the metrics of a Spark write")

    def onFailure(self, funcName: str, qe: Any, exception: Any) -> None:
        """A failed write raises in the writer itself; there is nothing to count."""

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]  # noqa: RUF012
