"""Declaring a pipeline: datasets (format, reader options, lot interval) and jobs (inputs, output, transform).

A pipeline is an ordinary Python module that builds one ``Pipeline``. Everything that can be wrong
with it (an unknown dataset, a second producer, a cycle, a lot mapping that does not divide, a
transform parameter that matches no input) is found here, before any lot is claimed. pyspark is
not imported: a pipeline can be loaded and checked without a JVM.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import json
import logging
import sys
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from lotline.domain import checks as quality
from lotline.domain.arrival import ArrivalPolicy
from lotline.domain.checks import (
    DROP,
    Check,
    CheckDeclarationError,
    Custom,
    Expectation,
    check,
    expect,
    row_count,
    unique,
)
from lotline.domain.coordination import LotMapping
from lotline.domain.errors import InvalidInput, LotlineError
from lotline.domain.lots import Interval
from lotline.domain.names import validate_name
from lotline.domain.reading import check_table_name
from lotline.domain.versions import code_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Lot", "Pipeline", "check", "expect", "row_count", "unique"]

FORMATS = ("parquet", "csv", "json", "text")
#: The transform parameter that receives the ``Lot`` context (every other one is an input by name).
LOT_PARAMETER = "lot"
#: A pipeline file is imported as ``lotline_pipeline_<stem>``, a name no other process can import
#: (Spark's Python workers): ``Pipeline.file_modules`` lists the modules to ship to them.
FILE_MODULE_PREFIX = "lotline_pipeline_"


#: PySpark's error classes when something at import time needs the active session (classic; and
#: Spark Connect's, in a process already in Connect mode: SPARK_CONNECT_MODE_ENABLED).
_NO_SESSION = ("SESSION_OR_CONTEXT_NOT_EXISTS", "NO_ACTIVE_OR_DEFAULT_SESSION")


class PipelineError(InvalidInput):
    """The pipeline module is broken: nothing was registered or claimed."""

    code = "invalid_pipeline"


class NeedsSpark(PipelineError):
    """The pipeline file asks for a SparkSession while it is imported (a module-level ``@F.udf``):
    ``session.load_pipeline_with_spark`` starts one and loads it again."""


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset as the pipeline declares it; ``interval`` None means named lots (e.g. ``2023-01-01``)."""

    name: str
    format: str
    interval: Interval | None
    options: Mapping[str, str] = field(default_factory=dict)
    #: A DDL schema (``"ts timestamp, url string"``): read with it instead of inferring, and the
    #: shape of this input when a lot has no data at all.
    schema: str | None = None
    #: A source's arrival policy, when the pipeline declares one (``late_after``/``absent``).
    arrival: ArrivalPolicy | None = None
    #: A catalog table (``database.table``) the runner keeps over the READY lots (docs/lots.md "A
    #: Spark catalog table"); not part of the declaration: it changes where lots are shown, not them.
    table: str | None = None

    def __hash__(self) -> int:
        """By name (its options are a dict): a dataset spec keys a job's ``checks=`` by output."""
        return hash(self.name)

    def declaration(self) -> dict[str, Any]:
        """What defines the dataset for the job version (anything that changes what a job reads)."""
        return {
            "name": self.name,
            "format": self.format,
            "interval": str(self.interval) if self.interval else None,
            "options": dict(sorted(self.options.items())),
            "schema": self.schema,
        }


@dataclass(frozen=True)
class Lot:
    """What a transform knows about the lot it computes."""

    id: str
    #: The window of an interval lot (UTC); None for a named lot.
    start: datetime | None
    end: datetime | None
    #: The input lots the job reads, as (dataset, lot).
    inputs: tuple[tuple[str, str], ...]
    run_id: uuid.UUID
    attempt: int
    spark: SparkSession
    log: logging.Logger
    #: For a job with ``partition_by``: the part computed now (``day=2023-01-02``; ``part=00003`` for
    #: groups of objects), its partition values, and its child run. None otherwise.
    part: str | None = None
    part_values: Mapping[str, str] = field(default_factory=dict)
    child_run_id: uuid.UUID | None = None


#: What ``on_change=`` may say: flag a changed job's older lots stale, or recompute them at once.
ON_CHANGE = ("flag", "recompute")


@dataclass(frozen=True)
class JobSpec:
    name: str
    inputs: tuple[DatasetSpec, ...]
    #: Every output, in declared order (at least one); each lot is published for all of them alike.
    #: Declared with ``outputs=``, the transform returns a dict by dataset name (or a tuple in
    #: declared order).
    outputs: tuple[DatasetSpec, ...]
    transform: Callable[..., DataFrame]
    #: Transform parameter -> input dataset name (the ``lot`` parameter is not listed).
    parameters: Mapping[str, str]
    takes_lot: bool
    lot_mapping: str | None
    #: Child work: split each lot's first input by these partition values of its objects, or into
    #: groups of at most this many objects; None: the lot is one piece.
    partition_by: tuple[str, ...] | int | None = None
    #: How many parts of one lot run at once (threads sharing the Spark application).
    parallel_parts: int = 2
    #: What gates the lot's publication, by output dataset name (``domain/checks.py``), evaluated
    #: on each output's write by ``spark/checks.py``; an output without checks is not listed.
    checks: Mapping[str, tuple[Check, ...]] = field(default_factory=dict)
    #: A quarantine job (``<job>__quarantine``): the checked job whose failing rows it writes.
    quarantine: Quarantine | None = None
    #: Declared with ``outputs=`` (even with one output): its declaration and its transform's result
    #: are keyed by output.
    several: bool = False
    #: What a new job version does to the lots an older one made (``ON_CHANGE``): ``flag`` them stale,
    #: or ``recompute`` them (reopened when the runner registers the new version). Not part of the
    #: version: it says how a change is treated, not what is computed.
    on_change: str = "flag"

    @property
    def output(self) -> DatasetSpec:
        """The first output: the one the job's lots are claimed on (and counted by), whose
        declaration its version has always included."""
        return self.outputs[0]

    def checks_of(self, output: str) -> tuple[Check, ...]:
        """The checks gating ``output`` (none: an empty tuple)."""
        return self.checks.get(output, ())

    @property
    def location(self) -> str:
        """Where the code lives, stable across machines: ``module:qualname``."""
        return f"{self.transform.__module__}:{self.transform.__qualname__}"

    @property
    def code_digest(self) -> str:
        """SHA-256 of the transform's code (``code_text``: comments and docstrings left out) and of
        the declarations: a change is a new job version (docs/pipelines.md "Job versions")."""
        try:
            source = code_text(inspect.getsource(self.transform))
        except (OSError, TypeError):
            source = self.location  # no source to read (e.g. built at run time): its name stands in
        customs = [c.function for listed in self.checks.values() for c in listed if isinstance(c, Custom)]
        source += _helpers(self.transform, *customs)
        declared = {
            "inputs": [d.declaration() for d in self.inputs],
            "output": self.output.declaration(),
            **({"outputs": [d.declaration() for d in self.outputs]} if self.several else {}),
            "mapping": self.lot_mapping,
            "partitionBy": self.partition_by,
        }
        gates = {
            **{name: list(checks) for name, checks in self.checks.items()},
            **(self.quarantine.drops if self.quarantine is not None else {}),
        }
        if gates:
            declarations = {name: [c.declaration() for c in listed] for name, listed in gates.items()}
            # One output's checks are a list (as before outputs were keyed); several, by output.
            declared["checks"] = (
                declarations if self.several else [d for listed in declarations.values() for d in listed]
            )
            source += "".join(
                _source(c.function) for listed in gates.values() for c in listed if isinstance(c, Custom)
            )
        text = source + "\n" + json.dumps(declared, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def call(self, frames: Mapping[str, DataFrame], lot: Lot) -> dict[str, DataFrame]:
        """Call the transform with each input's DataFrame under its parameter name: each output's
        DataFrame by dataset name, or an InvalidInput (one line) for a result of the wrong shape."""
        if self.quarantine is not None:
            made = self.quarantine.source.call(frames, lot)
            return {name: made[source] for name, source in self.quarantine.sources.items()}
        kwargs: dict[str, Any] = {p: frames[d] for p, d in self.parameters.items()}
        if self.takes_lot:
            kwargs[LOT_PARAMETER] = lot
        result = self.transform(**kwargs)
        if not self.several:
            if not _is_dataframe(result):
                raise InvalidInput(
                    f"job {self.name}: the transform returned {type(result).__name__}, not a DataFrame."
                )
            return {self.output.name: result}
        return self._outputs_of(result)

    def _outputs_of(self, result: object) -> dict[str, DataFrame]:
        """A several-output transform's result: a dict by dataset name, or a tuple in declared order."""
        names = [d.name for d in self.outputs]
        shown = ", ".join(names)
        if isinstance(result, tuple):
            if len(result) != len(names):
                raise InvalidInput(
                    f"job {self.name}: the transform returned a tuple of {len(result)}, "
                    f"not one DataFrame per output ({shown})."
                )
            result = dict(zip(names, result, strict=True))
        if not isinstance(result, Mapping):
            raise InvalidInput(
                f"job {self.name}: the transform returned {type(result).__name__}, not a dict of "
                f"DataFrames by output ({shown})."
            )
        extra = sorted(str(k) for k in result if k not in names)
        if extra:
            raise InvalidInput(
                f"job {self.name}: the transform returned undeclared output {', '.join(extra)} "
                f"(outputs: {shown})."
            )
        missing = [n for n in names if n not in result]
        if missing:
            raise InvalidInput(
                f"job {self.name}: the transform returned no DataFrame for output {', '.join(missing)}."
            )
        for name in names:
            if not _is_dataframe(result[name]):
                raise InvalidInput(
                    f"job {self.name}: output {name} is {type(result[name]).__name__}, not a DataFrame."
                )
        return {name: result[name] for name in names}


@dataclass(frozen=True)
class Quarantine:
    """What a quarantine job writes: for each quarantine dataset, the rows of its ``source`` job's
    output that fail that output's ``drop`` expectations (the transform is the source's, run again)."""

    source: JobSpec
    #: Quarantine dataset -> the source's output it takes rows from.
    sources: Mapping[str, str]
    #: Quarantine dataset -> the drop expectations its rows fail.
    drops: Mapping[str, tuple[Expectation, ...]]


def _drop_expectations(checks: Sequence[Check]) -> tuple[Expectation, ...]:
    return tuple(c for c in checks if isinstance(c, Expectation) and c.on_fail == DROP)


def _partitioning(
    job: str, partition_by: Sequence[str] | int | None, parallel_parts: int
) -> tuple[str, ...] | int | None:
    if isinstance(parallel_parts, bool) or not isinstance(parallel_parts, int) or parallel_parts < 1:
        raise PipelineError(f"job {job}: parallel_parts must be a positive integer, got {parallel_parts!r}.")
    if partition_by is None:
        return None
    if isinstance(partition_by, int) and not isinstance(partition_by, bool):
        if partition_by < 1:
            raise PipelineError(f"job {job}: partition_by must be at least 1 object per part.")
        return partition_by
    if isinstance(partition_by, str) or not isinstance(partition_by, Sequence) or not partition_by:
        raise PipelineError(
            f"job {job}: partition_by is a list of partition names (['day']) or a number of objects "
            f"per part, got {partition_by!r}."
        )
    keys = tuple(partition_by)
    for key in keys:
        if not isinstance(key, str) or not key or any(c in key for c in "/=\\") or key in (".", ".."):
            raise PipelineError(f"job {job}: partition name {key!r} cannot name a folder (key=value).")
    if len(set(keys)) != len(keys):
        raise PipelineError(f"job {job}: partition_by names a partition twice.")
    return keys


def _declared_outputs(
    job: str, output: DatasetSpec | str | None, outputs: Sequence[DatasetSpec | str] | None
) -> tuple[DatasetSpec | str, ...]:
    """``output=`` or ``outputs=``, exactly one of them."""
    if output is not None and outputs is not None:
        raise PipelineError(f"job {job}: declare output= (one output) or outputs= (several), not both.")
    if outputs is None:
        if output is None:
            raise PipelineError(f"job {job} has no output: declare output= or outputs=.")
        return (output,)
    if isinstance(outputs, (str, DatasetSpec)) or not isinstance(outputs, Sequence) or not outputs:
        raise PipelineError(f"job {job}: outputs= is a non-empty list of datasets, got {outputs!r}.")
    return tuple(outputs)


def _is_dataframe(value: object) -> bool:
    from pyspark.sql import DataFrame

    return isinstance(value, DataFrame)


class Pipeline:
    """The datasets and jobs of one pipeline; its name is also the lineage namespace by default."""

    def __init__(self, name: str, *, namespace: str | None = None) -> None:
        self.name = validate_name("Pipeline", name)
        self.namespace = validate_name("Namespace", namespace or name)
        self.datasets: dict[str, DatasetSpec] = {}
        self.jobs: dict[str, JobSpec] = {}

    def dataset(
        self,
        name: str,
        *,
        format: str,
        interval: str | None = None,
        zone: str | None = None,
        options: Mapping[str, str] | None = None,
        schema: str | None = None,
        late_after: str | None = None,
        absent: str | None = None,
        table: str | None = None,
    ) -> DatasetSpec:
        """Declare a dataset: ``interval`` (``PT5M``, ``PT1H``, ``P1D``, ``P1W``, ``P1M``, ``P1Y``) or
        none for named lots; ``zone`` (``"America/New_York"``; default UTC) bounds lots of a day or
        longer by that zone's local days. A
        source (a dataset no job of the pipeline writes) may declare its arrival policy:
        ``late_after`` (ISO-8601, e.g. ``"PT15M"``: how long after an interval ends its data may
        still arrive) and ``absent`` (``"missing"``, the default, or ``"empty"``: docs/lots.md).
        ``table``: a Spark catalog table over its READY lots, kept by the runner."""
        validate_name("Dataset", name)
        if name in self.datasets:
            raise PipelineError(f"dataset {name} is declared twice.")
        if format not in FORMATS:
            raise PipelineError(f"dataset {name}: format {format!r} is not one of {', '.join(FORMATS)}.")
        if zone is not None and interval is None:
            raise PipelineError(f"dataset {name}: a zone needs an interval (named lots have no bounds).")
        try:
            parsed = Interval.parse(interval, zone) if interval is not None else None
        except InvalidInput as error:
            raise PipelineError(f"dataset {name}: {error.message}") from None
        arrival = None
        if late_after is not None or absent is not None:
            if interval is None:
                raise PipelineError(
                    f"dataset {name}: an arrival policy needs an interval (named lots are never due)."
                )
            try:
                arrival = ArrivalPolicy.parse(late_after, absent)
            except InvalidInput as error:
                raise PipelineError(f"dataset {name}: {error.message}") from None
        spec = DatasetSpec(
            name,
            format,
            parsed,
            {str(k): str(v) for k, v in (options or {}).items()},
            schema,
            arrival,
            None if table is None else _table_name(name, table),
        )
        self.datasets[name] = spec
        return spec

    def job(
        self,
        *,
        inputs: Sequence[DatasetSpec | str],
        output: DatasetSpec | str | None = None,
        outputs: Sequence[DatasetSpec | str] | None = None,
        name: str | None = None,
        partition_by: Sequence[str] | int | None = None,
        parallel_parts: int = 2,
        checks: Sequence[Check] | None = None,
        on_change: str = "flag",
    ) -> Callable[[Callable[..., DataFrame]], Callable[..., DataFrame]]:
        """Decorate a transform: it receives its inputs' DataFrames by dataset name (and ``lot``).

        ``output`` names its one output; ``outputs`` several (the transform then returns a dict of
        DataFrames by dataset name, or a tuple in this order): each lot is published for all of them
        in one transaction, or for none.

        ``partition_by`` makes child work: each lot is computed part by part — by the named
        partition values of the first input's objects (``["day"]``), or in groups of at most that
        many of its objects — each part a child run; a retry runs only the parts that failed.
        ``checks`` gate each lot's publication (``expect``, ``row_count``, ``unique``, ``check``):
        a list for one output; with several outputs, a dict by output (dataset or name) of lists,
        each evaluated on its output's write. ``drop`` expectations add the quarantine job
        (``<job>__quarantine``) and a quarantine dataset per output that drops (``<output>__quarantine``).
        ``on_change``: when the job's version changes, its lots made by an older version are stale;
        ``"flag"`` (the default) shows them so (``lotline backfill --only stale`` remakes them),
        ``"recompute"`` makes them eligible at once.
        """

        def declare(transform: Callable[..., DataFrame]) -> Callable[..., DataFrame]:
            job = name or transform.__name__
            if on_change not in ON_CHANGE:
                raise PipelineError(
                    f"job {job}: on_change={on_change!r} is not one of {', '.join(map(repr, ON_CHANGE))}."
                )
            declared = _declared_outputs(job, output, outputs)
            names = [d.name if isinstance(d, DatasetSpec) else d for d in declared]
            try:
                declared_checks = quality.validate_by_output(job, checks, names)
            except CheckDeclarationError as error:
                raise PipelineError(error.message) from None
            self._add_job(job, inputs, declared, transform)
            partitioning = _partitioning(job, partition_by, parallel_parts)
            self.jobs[job] = replace(
                self.jobs[job],
                partition_by=partitioning,
                parallel_parts=parallel_parts,
                several=outputs is not None,
                checks=declared_checks,
                on_change=on_change,
            )
            self._add_quarantine(self.jobs[job])
            return transform

        return declare

    def _add_job(
        self,
        name: str,
        inputs: Sequence[DatasetSpec | str],
        outputs: Sequence[DatasetSpec | str],
        transform: Callable[..., DataFrame],
    ) -> None:
        validate_name("Job", name)
        if name in self.jobs:
            raise PipelineError(f"job {name} is declared twice.")
        if not inputs:
            raise PipelineError(
                f"job {name} has no inputs: lotline runs jobs over the lots of their inputs "
                "(fill source datasets with `lotline ingest`)."
            )
        ins = tuple(self._known(name, d) for d in inputs)
        outs = tuple(self._known(name, d) for d in outputs)
        if len({d.name for d in ins}) != len(ins):
            raise PipelineError(f"job {name} lists an input twice.")
        if len({d.name for d in outs}) != len(outs):
            raise PipelineError(f"job {name} lists an output twice.")
        for out in outs:
            if out in ins:
                raise PipelineError(f"job {name}: dataset {out.name} is both an input and an output.")
            producer = next((j.name for j in self.jobs.values() if out in j.outputs), None)
            if producer is not None:
                raise PipelineError(
                    f"job {name}: dataset {out.name} is already produced by job {producer}; "
                    "a dataset has exactly one producer."
                )
        parameters, takes_lot = _match_parameters(name, transform, ins)
        mapping = _mapping(name, ins, outs[0])
        for out in outs[1:]:
            if out.interval != outs[0].interval:
                raise PipelineError(
                    f"job {name}: its outputs share its lots, but {out.name} has "
                    f"{out.interval or 'named lots'} and {outs[0].name} {outs[0].interval or 'named lots'}."
                )
        self.jobs[name] = JobSpec(name, ins, outs, transform, parameters, takes_lot, mapping)

    def _add_quarantine(self, job: JobSpec) -> None:
        """A job with ``drop`` expectations gets ``<job>__quarantine``: same inputs, transform and lot
        mapping, writing each dropping output's failing rows to ``<output>__quarantine`` (parquet, the
        output's interval); with several such outputs it is a job with several outputs."""
        drops = {
            output.name: found
            for output in job.outputs
            if (found := _drop_expectations(job.checks_of(output.name)))
        }
        if not drops:
            return
        name = quality.quarantine_name(job.name)
        validate_name("Job", name)
        if name in self.jobs:
            raise PipelineError(f"job {name} is declared twice (it is job {job.name}'s quarantine).")
        datasets = [
            self.dataset(
                quality.quarantine_name(output.name),
                format="parquet",
                interval=str(output.interval) if output.interval else None,
            )
            for output in job.outputs
            if output.name in drops
        ]
        quarantine = Quarantine(
            source=job,
            sources={d.name: output for d, output in zip(datasets, drops, strict=True)},
            drops={d.name: drops[output] for d, output in zip(datasets, drops, strict=True)},
        )
        self.jobs[name] = replace(
            job,
            name=name,
            outputs=tuple(datasets),
            several=len(datasets) > 1,
            checks={},
            quarantine=quarantine,
        )

    def _known(self, job: str, dataset: DatasetSpec | str) -> DatasetSpec:
        key = dataset.name if isinstance(dataset, DatasetSpec) else dataset
        found = self.datasets.get(key) if isinstance(key, str) else None
        if found is None or (isinstance(dataset, DatasetSpec) and found is not dataset):
            raise PipelineError(f"job {job}: dataset {key!r} is not declared in pipeline {self.name}.")
        return found

    def file_modules(self) -> tuple[ModuleType, ...]:
        """The modules loaded from pipeline files (``load_pipeline``) that its transforms are in."""
        names = sorted({job.transform.__module__ for job in self.jobs.values()})
        return tuple(sys.modules[n] for n in names if n.startswith(FILE_MODULE_PREFIX) and n in sys.modules)

    def local_modules(self) -> tuple[Path, ...]:
        """The ``.py`` files of the modules imported from the folders of the pipeline's files (its
        helpers, and theirs): pickled by reference in a UDF, they must be importable where it runs.
        The pipeline files themselves are not among them (``file_modules`` go by value)."""
        folders = {Path(m.__file__).resolve().parent for m in self.file_modules() if m.__file__}
        found = set()
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if file and not name.startswith(FILE_MODULE_PREFIX) and "." not in name:
                path = Path(file).resolve()
                if path.parent in folders and path.name == f"{name}.py":
                    found.add(path)
        return tuple(sorted(found))

    def ordered_jobs(self) -> list[JobSpec]:
        """Jobs in dependency order (producers first); a cycle is a PipelineError naming it."""
        producer = {d.name: j.name for j in self.jobs.values() for d in j.outputs}
        order: list[JobSpec] = []
        state: dict[str, str] = {}

        def visit(job: JobSpec, path: list[str]) -> None:
            if state.get(job.name) == "done":
                return
            if state.get(job.name) == "visiting":
                cycle = [*path[path.index(job.name) :], job.name]
                raise PipelineError(f"jobs form a cycle: {' -> '.join(cycle)}.")
            state[job.name] = "visiting"
            for upstream in (producer.get(d.name) for d in job.inputs):
                if upstream is not None:
                    visit(self.jobs[upstream], [*path, job.name])
            state[job.name] = "done"
            order.append(job)

        for job in sorted(self.jobs.values(), key=lambda j: j.name):
            visit(job, [])
        return order

    def select(self, names: Iterable[str]) -> list[JobSpec]:
        """The named jobs, in dependency order; an unknown name is an error."""
        wanted = set(names)
        unknown = sorted(wanted - set(self.jobs))
        if unknown:
            raise InvalidInput(
                f"pipeline {self.name} has no job {', '.join(unknown)}; jobs: {', '.join(sorted(self.jobs))}."
            )
        return [j for j in self.ordered_jobs() if j.name in wanted]


def _match_parameters(
    job: str, transform: Callable[..., Any], inputs: tuple[DatasetSpec, ...]
) -> tuple[dict[str, str], bool]:
    """Map the transform's parameters to input datasets by name (``-``, ``.``, ``/``, ``:`` read as ``_``)."""
    if not callable(transform):
        raise PipelineError(f"job {job}: the transform is not callable.")
    by_parameter = {_identifier(d.name): d.name for d in inputs}
    parameters: dict[str, str] = {}
    takes_lot = takes_any = False
    for parameter in inspect.signature(transform).parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            takes_any = True
            continue
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            raise PipelineError(f"job {job}: parameter {parameter.name} must be passable by name.")
        if parameter.name in by_parameter:
            parameters[parameter.name] = by_parameter[parameter.name]
        elif parameter.name == LOT_PARAMETER:
            takes_lot = True
        elif parameter.default is inspect.Parameter.empty:
            raise PipelineError(
                f"job {job}: transform parameter {parameter.name} matches no input "
                f"(inputs: {', '.join(d.name for d in inputs)}; the lot context is '{LOT_PARAMETER}')."
            )
    missing = [d for p, d in by_parameter.items() if p not in parameters]
    if missing and not takes_any:
        raise PipelineError(f"job {job}: input {', '.join(missing)} is not a parameter of the transform.")
    return parameters, takes_lot


#: Module-level values whose repr stands for them in a job's version (a threshold, a list of codes).
_PLAIN = (int, float, complex, str, bytes, bool, type(None))


def _plain(value: object) -> bool:
    if isinstance(value, tuple | frozenset):
        return all(_plain(v) for v in value)
    return isinstance(value, _PLAIN)


def _helpers(*functions: Callable[..., Any]) -> str:
    """The functions, classes and plain constants of the functions' own module that they use, and
    that those use in turn: editing a helper of the pipeline file (or a threshold it names) changes
    what the job computes as much as editing the transform does. Imported modules and anything
    defined elsewhere (installed packages) are not followed."""
    found: dict[str, str] = {}
    todo = list(functions)
    while todo:
        current = todo.pop()
        module, scope = getattr(current, "__module__", None), getattr(current, "__globals__", {})
        codes, names = [getattr(current, "__code__", None)], set()
        while codes:
            code = codes.pop()
            if code is not None:
                names.update(code.co_names)
                codes += [c for c in code.co_consts if inspect.iscode(c)]
        for name in sorted(names - found.keys()):
            value = scope.get(name, scope)  # ``scope`` itself: not a global of its module
            if name.startswith("__") or value is scope:
                continue
            if _plain(value):
                found[name] = repr(value)
            elif (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ == module:
                found[name] = _source(value)
                todo += [value] if inspect.isfunction(value) else list(_methods(value))
    return "".join(f"\n{name}: {text}" for name, text in sorted(found.items()))


def _methods(cls: type) -> Iterable[Callable[..., Any]]:
    for member in vars(cls).values():
        function = getattr(member, "__func__", member)  # a staticmethod's or classmethod's function
        if inspect.isfunction(function):
            yield function


def _source(function: Callable[..., Any]) -> str:
    try:
        return code_text(inspect.getsource(function))
    except (OSError, TypeError):
        return getattr(function, "__qualname__", repr(function))


def _identifier(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def _mapping(job: str, inputs: tuple[DatasetSpec, ...], output: DatasetSpec) -> str | None:
    """The lot mapping the intervals imply: none when they are equal, ``PT5M->PT1H`` when finer."""
    intervals = {d.interval for d in inputs}
    if len(intervals) > 1:
        shown = ", ".join(f"{d.name} {d.interval or 'named lots'}" for d in inputs)
        raise PipelineError(f"job {job}: its inputs have different lot intervals ({shown}).")
    (interval,) = intervals
    if interval == output.interval:
        return None
    if interval is None or output.interval is None:
        raise PipelineError(
            f"job {job}: inputs of {interval or 'named lots'} cannot make {output.name} lots of "
            f"{output.interval or 'named lots'}."
        )
    try:
        return str(LotMapping.parse(f"{interval}->{output.interval}"))
    except InvalidInput as error:
        raise PipelineError(f"job {job}: {error.message}") from None


def load_pipeline(reference: str) -> Pipeline:
    """Import a pipeline from a file path (``pipelines/weblogs.py``) or a module name (``pkg.weblogs``).

    The module must define exactly one ``Pipeline``. Whatever goes wrong on import is one PipelineError.
    """
    path = Path(reference)
    try:
        if reference.endswith(".py") or path.is_file():
            module = _import_file(path)
        else:
            module = importlib.import_module(reference)
    except LotlineError as error:
        raise PipelineError(f"pipeline {reference}: {error.message}") from None
    except ModuleNotFoundError as error:
        if error.name == reference:
            raise PipelineError(
                f"cannot load pipeline {reference}: no module {reference}{_file_hint(reference)}"
            ) from None
        raise PipelineError(f"cannot load pipeline {reference}: {_one_line(error)}") from None
    except Exception as error:
        message = f"cannot load pipeline {reference}: {_one_line(error)}{_where(error)}"
        if any(name in str(error) for name in _NO_SESSION):
            raise NeedsSpark(message) from None
        raise PipelineError(message) from None
    found = [v for v in vars(module).values() if isinstance(v, Pipeline)]
    if len(found) != 1:
        raise PipelineError(
            f"pipeline {reference} must define exactly one Pipeline; it defines {len(found)}"
            f"{_file_hint(reference) if not found else '.'}"
        )
    pipeline = found[0]
    try:
        pipeline.ordered_jobs()
    except PipelineError as error:
        raise PipelineError(f"pipeline {reference}: {error.message}") from None
    return pipeline


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise PipelineError(f"no such file {path}")
    name = f"{FILE_MODULE_PREFIX}{_identifier(path.stem)}"
    folder = str(path.resolve().parent)
    if folder not in sys.path:  # its helper modules import, after what is installed (no shadowing)
        sys.path.append(folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PipelineError(f"{path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _file_hint(reference: str) -> str:
    """``; did you mean the file `seattle.py`?`` when a module name is also a file without ``.py``."""
    if not reference.endswith(".py") and Path(f"{reference}.py").is_file():
        return f"; did you mean the file `{reference}.py`?"
    return "."


def _where(error: BaseException) -> str:
    """`` (weblogs.py, line 12)``: the innermost frame of the pipeline's own code that raised (a
    SyntaxError names its place in its message already)."""
    if isinstance(error, SyntaxError):
        return ""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith("<frozen")]
    own = [f for f in frames if Path(f.filename).resolve() != Path(__file__).resolve()]
    if not own:
        return ""
    return f" ({own[-1].filename}, line {own[-1].lineno})"


def _one_line(error: BaseException) -> str:
    """``SyntaxError: invalid syntax (weblogs.py, line 3)``: the type and the first line of the message."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def _table_name(dataset: str, table: str) -> str:
    try:
        return check_table_name(table)
    except InvalidInput as error:
        raise PipelineError(f"dataset {dataset}: {error.message}") from None
