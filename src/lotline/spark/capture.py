"""What each write of a lot read and wrote, from Spark itself: a ``QueryExecutionListener``.

A py4j ``QueryExecutionListener`` sees every query the session finishes; for a file write the
analyzed plan is an ``InsertIntoHadoopFsRelationCommand``: its executed plan carries the write's
``numOutputRows``, ``numOutputBytes`` and ``numFiles`` (row counts without a second pass over the
data), and its query's plan the files actually read and where each written column comes from
(``spark.plans``) — dynamic lineage, seed 003. Other queries (schema inference, ``head``,
``collect``) are not writes and are ignored. The listener is called asynchronously (on Spark's
listener bus, through the py4j callback server), so a writer waits for the report of its own
output path; that also attributes every report to its lot when several lots share the session.

The listener asks the JVM for all of that in one py4j call: ``WriteFacts.java``, compiled when the
listener is registered by Janino (the compiler Spark ships for its generated code), answers a
query with one JSON text. Walking the plan from Python instead cost a py4j round trip per node,
expression and attribute, which the lot waited for (``docs/benchmarks.md``, ``bench/overhead``).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from lotline.domain.errors import InvalidInput
from lotline.spark.frames import write_attempt
from lotline.spark.pipeline import DatasetSpec
from lotline.spark.plans import WritePlan, write_plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lotline.spark.checks import Gate

log = logging.getLogger(__name__)
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
    #: The written columns as (name, Spark's simple type name), as ``DataFrame.schema`` has them.
    fields: tuple[tuple[str, str], ...] | None = None


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
                facts = _compile_write_facts(spark)
                ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
                spark._jsparkSession.listenerManager().register(_Listener(capture, facts))
                _LISTENING[application] = capture
            return _LISTENING[application]

    def write(self, frame: DataFrame, spec: DatasetSpec, location: str, checks: Gate) -> WriteReport | None:
        """Write ``frame`` to ``location`` (``frames.write_attempt``) and wait for its report (the
        checks' metrics are in it: the listener reads the write's observed metrics)."""
        write_attempt(frame, spec, location)
        return self.written(location)

    def not_captured(self, location: str) -> list[str]:
        """What the report of the write to ``location`` could not capture: the JVM sees it all."""
        return []

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


#: The class ``WriteFacts.java`` defines.
_FACTS_CLASS = "LotlineWriteFacts"


def _compile_write_facts(spark: SparkSession, source: str | None = None) -> Any:
    """An instance of ``WriteFacts.java``'s class (or of ``source``'s) in the driver's JVM, compiled
    by Spark's Janino; a source that does not compile is refused in one line."""
    if source is None:
        source = resources.files("lotline.spark").joinpath("WriteFacts.java").read_text(encoding="utf-8")
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # for_session checked the gateway
    try:
        compiler = jvm.org.codehaus.janino.SimpleCompiler()
        compiler.setParentClassLoader(spark._jsparkSession.getClass().getClassLoader())
        compiler.cook(source)
        return compiler.getClassLoader().loadClass(_FACTS_CLASS).newInstance()
    except Exception as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InvalidInput(
            f"lotline cannot read Spark {spark.version}'s writes: WriteFacts.java did not compile "
            f"in its JVM ({first})."
        ) from None


def _observed(qe: Any) -> dict[str, dict[str, Any]]:
    """``QueryExecution.observedMetrics``: each named observation's row as a dict (one look when none).
    A row is read as its JSON text (``Row.json``): one py4j call, not one per metric (a call each
    cost the lot ~5 ms with a dozen metrics, measured: docs/benchmarks.md, "bench.overhead")."""
    metrics = qe.observedMetrics()
    if metrics.isEmpty():
        return {}
    found: dict[str, dict[str, Any]] = {}
    entries = metrics.iterator()
    while entries.hasNext():
        entry = entries.next()
        found[str(entry._1())] = json.loads(entry._2().json())
    return found


def _fields(schema: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The columns of Spark's schema JSON, typed as pyspark names them (``DataFrame.schema``)."""
    from pyspark.sql.types import StructType

    return tuple((f.name, f.dataType.simpleString()) for f in StructType.fromJson(schema).fields)


class _Listener:
    """The Java side calls these; anything raised here would only be logged by py4j, so nothing is."""

    def __init__(self, capture: WriteCapture, facts: Any) -> None:
        self._capture = capture
        self._facts = facts

    def onSuccess(self, funcName: str, qe: Any, durationNs: int) -> None:
        try:
            described = self._facts.describe(qe)
            if described is None:
                return  # reads, schema inference and other internal queries
            write = json.loads(described)
        except Exception:
            log.exception("could not read a Spark write")
            return
        output = write["path"]
        plan: WritePlan | None = None
        if write["plan"] is None:
            log.warning(
                "could not read the plan of the write to %s (%s); its reads are unknown",
                output,
                write.get("planError"),
            )
        else:
            try:
                plan = write_plan(write["plan"])
            except Exception:
                log.exception("could not read the plan of the write to %s; its reads are unknown", output)
        metrics = write["metrics"]
        rows, size, files = (metrics.get(n) for n in ("numOutputRows", "numOutputBytes", "numFiles"))
        try:
            observed = _observed(qe) if write["observed"] else {}
        except Exception:
            log.exception("could not read the observed metrics of the write to %s", output)
            observed = {}
        try:
            fields: tuple[tuple[str, str], ...] | None = _fields(write["schema"])
        except Exception:
            log.exception("could not read the schema of the write to %s", output)
            fields = None  # the writer asks its DataFrame
        report = WriteReport(rows, size, files, plan, observed, fields)
        self._capture.report(output, report)

    def onFailure(self, funcName: str, qe: Any, exception: Any) -> None:
        """A failed write raises in the writer itself; there is nothing to count."""

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]  # noqa: RUF012
