"""Checks that gate a lot's publication: what a job declares, what an evaluation found, and the one
line a failing check fails the lot with.

A job declares its checks with its other declarations (``@p.job(..., checks=[...])``):

- ``expect("dep_delay IS NOT NULL", on_fail="fail" | "warn" | "drop")``: a row expectation, a
  Spark SQL condition every output row must meet (a row for which it is NULL fails it);
- ``row_count(min=, max=)``: bounds on the rows the lot publishes;
- ``unique("flight", "day")``: no two published rows share these columns;
- ``check(function, name=, on_fail=)``: ``function(df, lot)`` over the published rows returns
  ``True``/``False`` or ``(ok, {metadata})``.

Everything here is pure: declarations are checked when the pipeline is loaded (a bad one is a
one-line error and nothing is registered), evaluation is ``spark/checks.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lotline.domain.errors import InvalidInput

#: What a failing check does: fail the lot, publish it and record a warning, or (row expectations
#: only) publish the passing rows and write the failing ones to the quarantine dataset.
FAIL, WARN, DROP = "fail", "warn", "drop"
ACTIONS = (FAIL, WARN, DROP)
#: A quarantine dataset and the job that fills it are named after the checked output and job.
QUARANTINE_SUFFIX = "__quarantine"
#: The column of a quarantine row naming the drop expectations it failed (comma-separated).
FAILED_COLUMN = "_failed_checks"
#: The run facet that carries a lot's check results (``Verdict.summary``).
CHECKS_FACET = "lotline_checks"


class CheckDeclarationError(InvalidInput):
    """A check is declared wrongly (an unknown action, an empty condition, bounds min > max)."""

    code = "invalid_check"


class CheckFailed(InvalidInput):
    """A ``fail`` check did not hold on the lot's output: the lot fails like a transform error."""

    code = "check_failed"


@dataclass(frozen=True)
class Expectation:
    """A row expectation: ``condition`` (Spark SQL) holds for every row."""

    condition: str
    on_fail: str = FAIL

    @property
    def name(self) -> str:
        return self.condition

    def declaration(self) -> dict[str, Any]:
        return {"expect": self.condition, "onFail": self.on_fail}


@dataclass(frozen=True)
class RowCount:
    """The lot publishes between ``min`` and ``max`` rows (either may be None: unbounded)."""

    min: int | None = None
    max: int | None = None
    on_fail: str = FAIL

    @property
    def name(self) -> str:
        low = self.min if self.min is not None else 0
        return f"row_count between {low} and {self.max if self.max is not None else 'any'}"

    def declaration(self) -> dict[str, Any]:
        return {"rowCount": [self.min, self.max], "onFail": self.on_fail}


@dataclass(frozen=True)
class Unique:
    """No two published rows have the same values of ``columns``."""

    columns: tuple[str, ...]
    on_fail: str = FAIL

    @property
    def name(self) -> str:
        return f"unique({', '.join(self.columns)})"

    def declaration(self) -> dict[str, Any]:
        return {"unique": list(self.columns), "onFail": self.on_fail}


@dataclass(frozen=True)
class Custom:
    """``function(df, lot)`` over the published rows: ``bool`` or ``(bool, metadata)``."""

    function: Callable[..., Any]
    label: str
    on_fail: str = FAIL

    @property
    def name(self) -> str:
        return self.label

    def declaration(self) -> dict[str, Any]:
        return {"check": self.label, "onFail": self.on_fail}


Check = Expectation | RowCount | Unique | Custom


def _action(what: str, on_fail: object, allowed: tuple[str, ...] = (FAIL, WARN)) -> str:
    if on_fail not in allowed:
        raise CheckDeclarationError(
            f"check {what}: on_fail must be one of {', '.join(allowed)}, got {on_fail!r}."
        )
    return str(on_fail)


def expect(condition: str, *, on_fail: str = FAIL) -> Expectation:
    """Every output row meets ``condition`` (Spark SQL, as in ``WHERE``)."""
    if not isinstance(condition, str) or not condition.strip():
        raise CheckDeclarationError(
            "check expect(...): the condition must be a non-empty Spark SQL condition."
        )
    text = " ".join(condition.split())
    problem = _syntax_problem(text)
    if problem is not None:
        raise CheckDeclarationError(f"check {text}: invalid Spark SQL condition ({problem}).")
    return Expectation(text, _action(text, on_fail, ACTIONS))


def row_count(*, min: int | None = None, max: int | None = None, on_fail: str = FAIL) -> RowCount:
    """The lot publishes at least ``min`` and at most ``max`` rows."""
    for label, value in (("min", min), ("max", max)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise CheckDeclarationError(f"check row_count: {label} must be a count (>= 0), got {value!r}.")
    if min is None and max is None:
        raise CheckDeclarationError("check row_count: give min, max or both.")
    if min is not None and max is not None and min > max:
        raise CheckDeclarationError(f"check row_count: min {min} is greater than max {max}.")
    declared = RowCount(min, max)
    return RowCount(min, max, _action(declared.name, on_fail))


def unique(*columns: str, on_fail: str = FAIL) -> Unique:
    """No two published rows share the values of ``columns``."""
    if not columns or any(not isinstance(c, str) or not c.strip() for c in columns):
        raise CheckDeclarationError(f"check unique: name one or more columns, got {columns!r}.")
    if len(set(columns)) != len(columns):
        raise CheckDeclarationError(f"check unique: a column is named twice in {columns!r}.")
    declared = Unique(tuple(columns))
    return Unique(declared.columns, _action(declared.name, on_fail))


def check(function: Callable[..., Any], *, name: str | None = None, on_fail: str = FAIL) -> Custom:
    """``function(df, lot)`` decides: ``True``/``False`` or ``(ok, {metadata})``."""
    if not callable(function):
        raise CheckDeclarationError(f"check: {function!r} is not callable.")
    label = name or getattr(function, "__name__", None) or repr(function)
    return Custom(function, label, _action(label, on_fail))


def validate(job: str, checks: object) -> tuple[Check, ...]:
    """A job's ``checks=``: a list of declared checks, no two of the same name."""
    if checks is None:
        return ()
    if isinstance(checks, (str, bytes)) or not isinstance(checks, (list, tuple)):
        raise CheckDeclarationError(
            f"job {job}: checks must be a list (checks=[expect(...)]), got {checks!r}."
        )
    found: list[Check] = []
    for item in checks:
        if not isinstance(item, (Expectation, RowCount, Unique, Custom)):
            raise CheckDeclarationError(
                f"job {job}: {item!r} is not a check (use expect, row_count, unique or check)."
            )
        if any(c.name == item.name for c in found):
            raise CheckDeclarationError(f"job {job}: check {item.name} is declared twice.")
        found.append(item)
    return tuple(found)


def validate_by_output(job: str, checks: object, outputs: Sequence[str]) -> dict[str, tuple[Check, ...]]:
    """A job's ``checks=`` by output name: a list is the one output's checks; a job with several
    outputs takes a dict by output (its name, or its dataset spec, anything with a ``name``)."""
    if checks is None:
        return {}
    if not isinstance(checks, Mapping):
        if len(outputs) > 1 and isinstance(checks, (list, tuple)):
            raise CheckDeclarationError(
                f"job {job}: a job with several outputs takes its checks by output "
                f"(checks={{{outputs[0]!r}: [expect(...)], ...}}), not a list."
            )
        found = validate(job, checks)
        return {outputs[0]: found} if found else {}
    by_output: dict[str, tuple[Check, ...]] = {}
    for key, listed in checks.items():
        name = key if isinstance(key, str) else getattr(key, "name", None)
        if not isinstance(name, str) or name not in outputs:
            shown = name if isinstance(name, str) else repr(key)
            raise CheckDeclarationError(
                f"job {job}: checks are keyed by output, and {shown} is not an output of the job "
                f"(outputs: {', '.join(outputs)})."
            )
        if name in by_output:
            raise CheckDeclarationError(f"job {job}: the checks of output {name} are given twice.")
        found = validate(f"{job} output {name}", listed)
        if found:
            by_output[name] = found
    return {name: by_output[name] for name in outputs if name in by_output}


def _syntax_problem(text: str) -> str | None:
    """What a Python reading of the condition already refuses (Spark's parser checks the rest before
    any lot is claimed): unbalanced quotes or brackets, a ``;``."""
    depth, quote = 0, ""
    for char in text:
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return "a ')' closes nothing"
        elif char == ";":
            return "';' ends a statement; a condition is one expression"
    if quote:
        return f"unclosed {quote}"
    if depth:
        return "unclosed '('"
    return None


@dataclass(frozen=True)
class CheckResult:
    """One check on one lot's output: whether it held, and what was counted."""

    name: str
    kind: str  # expect, row_count, unique, check
    on_fail: str
    success: bool
    #: The one column the check is about, when there is one (a condition naming one column).
    column: str | None = None
    #: Rows that failed it (expectations; duplicates for unique), of ``total`` rows.
    failed: int | None = None
    total: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def reason(self) -> str:
        """``check dep_delay IS NOT NULL failed: 3 of 240 rows``."""
        if self.kind == "expect":
            what = f"{self.failed} of {self.total} rows"
        elif self.kind == "row_count":
            what = f"{self.total} rows"
        elif self.kind == "unique":
            what = f"{self.failed} duplicate rows of {self.total}"
        else:
            what = ", ".join(f"{k}={v}" for k, v in self.metadata.items()) or "returned false"
        return f"check {self.name} failed: {what}"

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"check": self.name, "kind": self.kind, "onFail": self.on_fail}
        found["success"] = self.success
        for key, value in (("column", self.column), ("failed", self.failed), ("rows", self.total)):
            if value is not None:
                found[key] = value
        if self.metadata:
            found["metadata"] = dict(self.metadata)
        return found


@dataclass(frozen=True)
class Verdict:
    """Every check of one lot's output (or of one part of it), with the metrics counted on the way:
    rows before anything was dropped, rows dropped, nulls per column."""

    results: tuple[CheckResult, ...]
    rows: int | None
    dropped: int = 0
    null_counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if not r.success and r.on_fail == FAIL)

    @property
    def warnings(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if not r.success and r.on_fail == WARN)

    def reason(self) -> str:
        return "; ".join(r.reason() for r in self.failures)

    def summary(self) -> dict[str, Any]:
        """The run's ``lotline_checks`` facet: every result, the counts, and the warnings."""
        return {
            "results": [r.to_json() for r in self.results],
            "rows": self.rows,
            "dropped": self.dropped,
            "warnings": [r.name for r in self.warnings],
        }


def merge(verdicts: list[Verdict]) -> Verdict | None:
    """The verdict of a lot computed in parts: counts added, a check holds if it held in every part."""
    if not verdicts:
        return None
    if len(verdicts) == 1:
        return verdicts[0]
    results: list[CheckResult] = []
    for index, first in enumerate(verdicts[0].results):
        same = [v.results[index] for v in verdicts]
        failed = [r.failed for r in same]
        totals = [r.total for r in same]
        results.append(
            CheckResult(
                first.name,
                first.kind,
                first.on_fail,
                all(r.success for r in same),
                first.column,
                None if None in failed else sum(f for f in failed if f is not None),
                None if None in totals else sum(t for t in totals if t is not None),
                {k: v for r in same for k, v in r.metadata.items()},
            )
        )
    rows = [v.rows for v in verdicts]
    nulls: dict[str, int] = {}
    for verdict in verdicts:
        for column, count in verdict.null_counts.items():
            nulls[column] = nulls.get(column, 0) + count
    return Verdict(
        tuple(results),
        None if None in rows else sum(r for r in rows if r is not None),
        sum(v.dropped for v in verdicts),
        nulls,
    )


def run_summary(verdicts: Mapping[str, Verdict], *, several: bool) -> dict[str, Any]:
    """The run's ``lotline_checks`` facet: a job with one output, its verdict's ``summary``; with
    ``several`` outputs, every checked output's results (each naming its ``dataset``), the counts by
    output, and the warnings."""
    if not several:
        (verdict,) = verdicts.values()
        return verdict.summary()
    return {
        "results": [{"dataset": d, **r.to_json()} for d, v in verdicts.items() for r in v.results],
        "outputs": {d: {"rows": v.rows, "dropped": v.dropped} for d, v in verdicts.items()},
        "dropped": sum(v.dropped for v in verdicts.values()),
        "warnings": [r.name for v in verdicts.values() for r in v.warnings],
    }


def raise_failures(verdicts: Mapping[str, Verdict], *, several: bool) -> None:
    """Fail the lot if a ``fail`` check did not hold on any output; for a job with ``several``
    outputs each reason names its output (``output kept: check n > 0 failed: 1 of 3 rows``)."""
    failing = {d: v for d, v in verdicts.items() if v.failures}
    if not failing:
        return
    if not several:
        raise CheckFailed(next(iter(failing.values())).reason())
    raise CheckFailed("; ".join(f"output {d}: {v.reason()}" for d, v in failing.items()))


def published_with_warnings(facets: Mapping[str, Any] | None) -> bool:
    """Whether a version's facets say a ``warn`` check did not hold on it (``dataQualityAssertions``)."""
    assertions = ((facets or {}).get("dataQualityAssertions") or {}).get("assertions") or []
    return any(a.get("success") is False and a.get("severity") == WARN for a in assertions)


def quarantine_name(name: str) -> str:
    """The quarantine dataset of an output (and its job, of a job): ``hits`` -> ``hits__quarantine``."""
    return f"{name}{QUARANTINE_SUFFIX}"
