"""Evaluating a job's checks on one output's DataFrame of one lot (or part), before the commit.

Row expectations and the row count ride on the write itself: ``DataFrame.observe`` adds one
aggregation (rows, each expectation's failing rows, each column's nulls) to the write's own pass,
and its metrics arrive when the write ends — no second scan. The order of evaluation: ``drop``
expectations judge every row the transform made (the write filters them out after the
aggregation); ``fail`` and ``warn`` expectations, ``row_count``, ``unique`` and
``check(function)`` judge only the rows the lot publishes, so a dropped row is counted once. The
aggregation counts the kept rows and each other expectation's failures among them; lot-level
checks (``unique``, ``check(function)``) read the attempt's written files back, before anything is
published. The quarantine job of a job with ``drop`` expectations writes the rows that fail them.

The unit is (checks, DataFrame, lot): ``Gate.over`` wraps the frame to write, ``Gate.verdict``
judges it once written; the runner decides (fail the lot, or publish with the results as facets).
"""

from __future__ import annotations

import re
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lotline.domain.checks import (
    DROP,
    FAILED_COLUMN,
    Check,
    CheckDeclarationError,
    CheckFailed,
    CheckResult,
    Custom,
    Expectation,
    RowCount,
    Unique,
    Verdict,
)
from lotline.spark.connect import is_connect
from lotline.spark.pipeline import JobSpec, Lot, Pipeline, PipelineError

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import Column, DataFrame, SparkSession

#: Null counts are computed for at most this many columns (each is one more sum in the aggregation).
MAX_NULL_COLUMNS = 100
_WORD = re.compile(r"`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*)")


def check_conditions(spark: SparkSession, pipeline: Pipeline) -> None:
    """Every expectation parses as a Spark SQL expression (Spark's own parser, on the driver; no
    job): checked before any lot is claimed, one line naming the job and the condition. On Spark
    Connect the server's parser is asked through an analysis of ``SELECT <condition>`` (one call per
    condition): a parse error refuses it, an unknown column is the lot's to tell."""
    connected = is_connect(spark)
    parse = (
        _connect_parser(spark)
        if connected
        else spark._jsparkSession.sessionState().sqlParser().parseExpression
    )
    for job in pipeline.ordered_jobs():
        for item in (c for listed in job.checks.values() for c in listed):
            if not isinstance(item, Expectation):
                continue
            try:
                parse(item.condition)
            except Exception as error:
                detail = " ".join(str(error).split())[:300]
                raise PipelineError(
                    f"job {job.name}: check {item.condition}: invalid Spark SQL condition: {detail}"
                ) from None


def _connect_parser(spark: SparkSession) -> Callable[[str], object]:
    from pyspark.errors import ParseException
    from pyspark.sql import functions as F

    def parse(condition: str) -> object:
        try:
            return spark.range(0).select(F.expr(condition)).schema
        except ParseException:
            raise
        except Exception:
            return None  # parsed; not resolvable without the lot's columns

    return parse


def _passes(expectation: Expectation) -> Column:
    """True when the row meets the condition; NULL counts as not meeting it."""
    from pyspark.sql import functions as F

    return F.coalesce(F.expr(expectation.condition), F.lit(False))


def _all_pass(expectations: Sequence[Expectation]) -> Column:
    from pyspark.sql import functions as F

    condition = F.lit(True)
    for expectation in expectations:
        condition = condition & _passes(expectation)
    return condition


def failing_rows(frame: DataFrame, expectations: Sequence[Expectation]) -> DataFrame:
    """The quarantine's rows: those failing any of ``expectations``, with ``_failed_checks`` naming them."""
    from pyspark.sql import functions as F

    failed = F.concat_ws(", ", *[F.when(~_passes(e), F.lit(e.condition)) for e in expectations]).alias(
        FAILED_COLUMN
    )
    return frame.where(~_all_pass(expectations)).select("*", failed)


@dataclass
class Gate:
    """The frame to write for one output of one lot, and how to judge it once written."""

    frame: DataFrame
    checks: tuple[Any, ...]
    columns: tuple[str, ...]
    #: The name of the write's observation (its metrics come with the write's report: classic mode's
    #: listener reads them, Spark Connect returns them in the write's response); None: no checks.
    observation: str | None

    @classmethod
    def over(cls, output: DataFrame, job: JobSpec, dataset: str) -> Gate:
        """The frame to write to output ``dataset``: with its checks' metrics observed (and drop
        expectations' failing rows filtered out); a quarantine job's frame is the failing rows."""
        if job.quarantine is not None:
            return cls(failing_rows(output, job.quarantine.drops[dataset]), (), (), None)
        checks = job.checks_of(dataset)
        if not checks:
            return cls(output, (), (), None)
        columns = tuple(output.columns[:MAX_NULL_COLUMNS])
        spark = output.sparkSession
        metrics, keep = _columns_of(spark if is_connect(spark) else spark.sparkContext, checks, columns)
        # A named observation: its metrics ride on the write's QueryExecution, which the capture
        # listener reads anyway (a pyspark ``Observation`` waits on a listener of its own). A name
        # per lot attributes the metrics to their write; Spark's generated code does not contain it
        # (its codegen cache still serves every lot: docs/benchmarks.md, "bench.overhead"). On Spark
        # Connect a name, not an ``Observation``: that one asks the server whether the frame streams.
        observation = f"lotline_checks_{uuid.uuid4().hex}"
        frame = output.observe(observation, *metrics)
        if keep is not None:
            frame = frame.where(keep)
        return cls(frame, checks, columns, observation)

    def verdict(
        self,
        observed: Mapping[str, Mapping[str, Any]],
        written: Callable[[], DataFrame],
        lot: Lot,
    ) -> Verdict | None:
        """The checks' results once the frame is written: ``observed`` as the write's report has
        it, ``written`` reads the attempt's files back (for lot-level checks only). None: the job
        has no checks."""
        if self.observation is None:
            return None
        got = observed.get(self.observation)
        if got is None:
            raise CheckFailed(
                "the checks could not be evaluated: Spark did not report the write's metrics in time"
            )
        rows = int(got.get("rows") or 0)
        expectations = [c for c in self.checks if isinstance(c, Expectation)]
        failed = {e.condition: int(got.get(f"failed{i}") or 0) for i, e in enumerate(expectations)}
        # The rows the lot publishes: those meeting every drop expectation (all, without one).
        published = int(got.get("kept") or 0) if any(e.on_fail == DROP for e in expectations) else rows
        nulls = {c: int(got.get(f"null{i}") or 0) for i, c in enumerate(self.columns)}
        frame: DataFrame | None = None
        results: list[CheckResult] = []
        for item in self.checks:
            if isinstance(item, Expectation):
                count = failed[item.condition]
                column = _column_of(item.condition, self.columns)
                judged = rows if item.on_fail == DROP else published
                results.append(
                    CheckResult(item.name, "expect", item.on_fail, count == 0, column, count, judged)
                )
                continue
            if isinstance(item, RowCount):
                results.append(_row_count(item, published))
                continue
            if frame is None:
                frame = written()
            if isinstance(item, Unique):
                results.append(_unique(item, frame))
            elif isinstance(item, Custom):
                results.append(_custom(item, frame, lot))
        # A row dropped by several expectations is dropped once: the published rows tell.
        return Verdict(tuple(results), rows, rows - published, nulls)


_Metrics = tuple[list["Column"], "Column | None"]
#: By Spark application (its SparkContext), the metric Columns of (checks, output columns): built
#: once and reused by every lot, since each Column is a few py4j calls (~40 ms a lot for three
#: expectations and six columns, measured: docs/benchmarks.md). They are unresolved expressions, so
#: one Column serves any DataFrame with those columns.
#: (A Spark Connect session, which has no SparkContext, keys its own.)
_BUILT: weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], _Metrics]] = weakref.WeakKeyDictionary()
_BUILDING = threading.Lock()


def _columns_of(
    context: SparkContext | SparkSession, checks: tuple[Check, ...], columns: tuple[str, ...]
) -> _Metrics:
    """The observation's metrics (rows, each expectation's failing rows, each column's nulls; with
    ``drop`` expectations, the rows kept) and the filter keeping the rows that meet every ``drop``
    expectation (None: nothing dropped). A ``drop`` expectation counts its failures among all the
    rows; the others among the kept rows, the ones the lot publishes."""
    key = (checks, columns)
    with _BUILDING:
        found = _BUILT.setdefault(context, {}).get(key)
    if found is not None:
        return found
    from pyspark.sql import functions as F

    expectations = [c for c in checks if isinstance(c, Expectation)]
    drops = [e for e in expectations if e.on_fail == DROP]
    keep = _all_pass(drops) if drops else None
    metrics = [F.count(F.lit(1)).alias("rows")]
    for i, e in enumerate(expectations):
        fails = ~_passes(e) if keep is None or e.on_fail == DROP else keep & ~_passes(e)
        metrics.append(F.sum(F.when(fails, 1).otherwise(0)).alias(f"failed{i}"))
    metrics += [
        F.sum(F.when(F.col(_quoted(c)).isNull(), 1).otherwise(0)).alias(f"null{i}")
        for i, c in enumerate(columns)
    ]
    if keep is not None:
        metrics.append(F.sum(F.when(keep, 1).otherwise(0)).alias("kept"))
    built = (metrics, keep)
    with _BUILDING:
        _BUILT[context][key] = built
    return built


def _quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def _column_of(condition: str, columns: Sequence[str]) -> str | None:
    """The one output column a condition names (None: none or several)."""
    known = {c.lower(): c for c in columns}
    named = {known[w.lower()] for a, b in _WORD.findall(condition) if (w := a or b).lower() in known}
    return named.pop() if len(named) == 1 else None


def _row_count(item: RowCount, rows: int) -> CheckResult:
    ok = (item.min is None or rows >= item.min) and (item.max is None or rows <= item.max)
    return CheckResult(item.name, "row_count", item.on_fail, ok, None, None, rows)


def _unique(item: Unique, frame: DataFrame) -> CheckResult:
    """Duplicates: rows beyond the first of each key (one aggregation over the written files)."""
    from pyspark.sql import functions as F

    counts = frame.groupBy(*[_quoted(c) for c in item.columns]).count()
    row = counts.agg(
        F.coalesce(F.sum("count"), F.lit(0)).alias("rows"),
        F.coalesce(F.sum(F.col("count") - 1), F.lit(0)).alias("duplicates"),
    ).collect()[0]
    duplicates = int(row["duplicates"])
    column = item.columns[0] if len(item.columns) == 1 else None
    return CheckResult(
        item.name, "unique", item.on_fail, duplicates == 0, column, duplicates, int(row["rows"])
    )


def _custom(item: Custom, frame: DataFrame, lot: Lot) -> CheckResult:
    """``function(df, lot)``: ``bool`` or ``(bool, metadata)``; anything else fails the lot naming it."""
    answer = item.function(frame, lot)
    metadata: dict[str, Any] = {}
    if isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[1], dict):
        answer, metadata = answer[0], {str(k): _plain(v) for k, v in answer[1].items()}
    if not isinstance(answer, bool):
        raise CheckDeclarationError(
            f"check {item.name}: the function must return True/False or (ok, {{metadata}}), "
            f"got {type(answer).__name__}."
        )
    return CheckResult(item.name, "check", item.on_fail, answer, None, None, None, metadata)


def _plain(value: Any) -> Any:
    """A metadata value as JSON can carry it."""
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)
