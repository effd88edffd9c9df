"""Each write's report on a Spark Connect client: what classic mode's query listener reports
(``spark.capture``), without a JVM in this process and without a jar on the server.

- the plan: the protobuf the client sends for the write, resolved on the client
  (``spark.connect_plans``; a file read's schema is asked of the server once per distinct read
  whose schema the relation does not declare — the text source's is known);
- the row count: a ``DataFrame.observe`` of the written rows, whose metrics come back in the
  write's own response (so do a job's checks' metrics: ``spark.checks``), read from the written
  frame's ``executionInfo`` (observations by name: a pyspark ``Observation`` would first ask the
  server, in a round trip of its own, whether the frame streams);
- the written columns: the written DataFrame's schema (one ``AnalyzePlan`` call, sent while the
  write runs, so the lot does not wait for it);
- the written objects, their bytes and files: the runner lists the attempt folder anyway.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

from lotline.spark.capture import WriteReport
from lotline.spark.checks import Gate
from lotline.spark.connect_plans import connect_facts, text_fields
from lotline.spark.frames import write_attempt
from lotline.spark.pipeline import DatasetSpec
from lotline.spark.plans import write_plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
#: The metric of the written rows (an observation of the frame as written).
_ROWS = "rows"
_SchemaKey = tuple[str, str, tuple[tuple[str, str], ...], tuple[str, ...]]


class ConnectCapture:
    """One per session (``spark.capture.capture_for``); safe to share between claim loops."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._schemas: dict[_SchemaKey, tuple[tuple[str, str], ...]] = {}
        self._lock = threading.Lock()
        #: Asks the written frame's schema while its write runs (one thread per concurrent write).
        self._asking = ThreadPoolExecutor(thread_name_prefix="lotline schema")
        #: What the last report could not capture (the runner's ``lotline_capture`` run facet).
        self.gaps: dict[str, list[str]] = {}

    def write(self, frame: DataFrame, spec: DatasetSpec, location: str, checks: Gate) -> WriteReport:
        """Write ``frame`` to ``location`` (``frames.write_attempt``) and report it, with the metrics
        of the checks' observation (``checks.observation``) when the frame has one."""
        from pyspark.sql import functions as F

        client: Any = self._spark.client
        relation = cast(Any, frame)._plan.plan(client)  # the protobuf the client sends for it
        rows = f"lotline_rows_{uuid.uuid4().hex}"
        observed_frame = frame.observe(rows, F.count(F.lit(1)).alias(_ROWS))
        # The schema is asked while the write runs, but for ``spark.sql`` over DataFrames: the server
        # makes their ``{alias}`` temporary views of the session while it analyses such a plan and
        # drops them after, so two analyses at once can miss them (TABLE_OR_VIEW_NOT_FOUND).
        schema = self._asking.submit(lambda: frame.schema) if not _has(relation, "with_relations") else None
        write_attempt(observed_frame, spec, location)
        if schema is None:
            schema = self._asking.submit(lambda: frame.schema)
        info = observed_frame.executionInfo
        flows = dict(info.flows) if info is not None else {}
        observed = {name: dict(flows[name]) for name in (checks.observation,) if name in flows}
        count = flows.get(rows, {}).get(_ROWS)
        fields = tuple((f.name, f.dataType.simpleString()) for f in schema.result().fields)
        plan = None
        try:
            found = connect_facts(relation, [name for name, _ in fields], self._schema_of)
            plan = write_plan(found.facts)
            with self._lock:
                self.gaps[location] = found.gaps
        except Exception:
            log.exception("could not read the plan of the write to %s; its reads are unknown", location)
            with self._lock:
                self.gaps[location] = ["the write's plan could not be read"]
        return WriteReport(None if count is None else int(count), None, None, plan, observed, fields)

    def not_captured(self, location: str) -> list[str]:
        with self._lock:
            return self.gaps.pop(location, [])

    def _schema_of(
        self, format: str, schema: str, options: Mapping[str, str], paths: tuple[str, ...]
    ) -> tuple[tuple[str, str], ...]:
        """A file read's columns: the text source's are fixed, a declared schema's do not depend on
        the files (asked once per schema), an inferred one is asked of the server per distinct read."""
        if format == "text" and not schema:
            return text_fields()
        key: _SchemaKey = (format, schema, tuple(sorted(options.items())), () if schema else paths)
        with self._lock:
            known = self._schemas.get(key)
        if known is not None:
            return known
        reader = self._spark.read.format(format).options(**options)
        if schema:
            reader = reader.schema(schema)
        found = tuple((f.name, f.dataType.simpleString()) for f in reader.load(list(paths)).schema.fields)
        with self._lock:
            self._schemas[key] = found
        return found


def _has(message: Any, field: str) -> bool:
    """Whether a protobuf message (a plan) sets ``field`` anywhere within it."""
    for descriptor, value in message.ListFields():
        if descriptor.name == field:
            return True
        if descriptor.type == descriptor.TYPE_MESSAGE:
            values = value if isinstance(value, Sequence) else [value]  # a repeated field's, or one
            if any(_has(v, field) for v in values if hasattr(v, "ListFields")):
                return True
    return False
