"""What a Spark write read, and which input columns each written column comes from, from its plan.

Called by the query listener (``spark.capture``) with py4j handles on the analyzed plan of an
``InsertIntoHadoopFsRelationCommand``. Files read by the query are the ``HadoopFsRelation`` leaves
of the written query; column lineage follows expression ids down the analyzed plan, the way
Spark itself resolves attributes, so it needs no JVM agent (openlineage-spark's jar does the same
in Scala). Leaves that are not files (``createDataFrame``, RDDs, in-memory tables) have no dataset
and are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Transformation(StrEnum):
    """How an output column derives from an input column (OpenLineage ``columnLineage`` subtypes)."""

    IDENTITY = "IDENTITY"
    TRANSFORMATION = "TRANSFORMATION"
    AGGREGATION = "AGGREGATION"


@dataclass(frozen=True)
class FileRead:
    """One file relation the write read: its root paths as Spark names them, format and columns."""

    uris: tuple[str, ...]
    format: str
    fields: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ColumnSource:
    """An input column an output column is computed from: ``read`` indexes ``WritePlan.reads``."""

    read: int
    field: str
    transformation: Transformation


@dataclass(frozen=True)
class WritePlan:
    """The reads of one write and, for each written column, the input columns it comes from."""

    reads: tuple[FileRead, ...]
    columns: dict[str, tuple[ColumnSource, ...]]


#: exprId -> the input columns behind it, each as (read index, field name) -> transformation.
_Sources = dict[int, dict[tuple[int, str], Transformation]]
_FILE_RELATION = "HadoopFsRelation"
_AGGREGATES = ("AggregateExpression",)
_STRENGTH = {Transformation.IDENTITY: 0, Transformation.TRANSFORMATION: 1, Transformation.AGGREGATION: 2}


def write_plan(command: Any) -> WritePlan:
    """The reads and column lineage of a write command (``InsertIntoHadoopFsRelationCommand``)."""
    query = command.query()
    reads: list[FileRead] = []
    sources = _walk(query, reads)
    columns = {}
    for attribute in _seq(query.output()):
        found = sources.get(attribute.exprId().id(), {})
        columns[attribute.name()] = tuple(
            ColumnSource(read, field, kind) for (read, field), kind in sorted(found.items())
        )
    return WritePlan(tuple(reads), columns)


def _walk(node: Any, reads: list[FileRead]) -> _Sources:
    """The sources of every attribute ``node`` outputs (and of those its children output)."""
    kind = node.getClass().getSimpleName()
    if kind == "LogicalRelation":
        return _relation(node, reads)
    children = [_walk(child, reads) for child in _seq(node.children())]
    below: _Sources = {}
    for child in children:
        below.update(child)
    if kind == "Union":
        return _union(node, children, below)
    produced: _Sources = {}
    expressions = list(_seq(node.expressions()))
    for attribute in _seq(node.output()):
        expr_id = attribute.exprId().id()
        if expr_id in below:
            continue
        named = next((e for e in expressions if _named_id(e) == expr_id), None)
        # A column the node makes (Project, Aggregate, Window: its named expression; Generate and
        # others: from everything the node's expressions refer to).
        derived_from = [named] if named is not None else expressions
        produced[expr_id] = _derive(derived_from, below)
    below.update(produced)
    return below


def _relation(node: Any, reads: list[FileRead]) -> _Sources:
    relation = node.relation()
    if relation.getClass().getSimpleName() != _FILE_RELATION:
        return {}
    index = len(reads)
    attributes = list(_seq(node.output()))
    reads.append(
        FileRead(
            uris=tuple(str(p.toString()) for p in _seq(relation.location().rootPaths())),
            format=_format_name(str(relation.fileFormat().toString())),
            fields=tuple((a.name(), str(a.dataType().simpleString())) for a in attributes),
        )
    )
    return {a.exprId().id(): {(index, a.name()): Transformation.IDENTITY} for a in attributes}


def _union(node: Any, children: list[_Sources], below: _Sources) -> _Sources:
    """A union's columns are its first child's attributes; the others' columns match by position."""
    child_outputs = [list(_seq(child.output())) for child in _seq(node.children())]
    for position, attribute in enumerate(_seq(node.output())):
        merged: dict[tuple[int, str], Transformation] = {}
        for outputs, sources in zip(child_outputs, children, strict=True):
            if position < len(outputs):
                _merge(merged, sources.get(outputs[position].exprId().id(), {}))
        below[attribute.exprId().id()] = merged
    return below


def _derive(expressions: list[Any], below: _Sources) -> dict[tuple[int, str], Transformation]:
    derived: dict[tuple[int, str], Transformation] = {}
    for expression in expressions:
        kind = _transformation(expression)
        for reference in _seq(expression.references().toSeq()):
            for source, inner in below.get(reference.exprId().id(), {}).items():
                _merge(derived, {source: max(inner, kind, key=_STRENGTH.__getitem__)})
    return derived


def _transformation(expression: Any) -> Transformation:
    """IDENTITY for a column passed on (maybe renamed), AGGREGATION if an aggregate is involved."""
    inner = expression.child() if expression.getClass().getSimpleName() == "Alias" else expression
    if inner.getClass().getSimpleName() == "AttributeReference":
        return Transformation.IDENTITY
    if any(node.getClass().getSimpleName() in _AGGREGATES for node in _tree(inner)):
        return Transformation.AGGREGATION
    return Transformation.TRANSFORMATION


def _merge(into: dict[tuple[int, str], Transformation], more: dict[tuple[int, str], Transformation]) -> None:
    for source, kind in more.items():
        known = into.get(source)
        into[source] = kind if known is None else max(known, kind, key=_STRENGTH.__getitem__)


def _named_id(expression: Any) -> int | None:
    if expression.getClass().getSimpleName() not in ("Alias", "AttributeReference"):
        return None
    return int(expression.exprId().id())


def _tree(expression: Any) -> Iterator[Any]:
    yield expression
    for child in _seq(expression.children()):
        yield from _tree(child)


def _seq(scala_seq: Any) -> Iterator[Any]:
    """The elements of a Scala ``Seq`` handed over by py4j."""
    for index in range(scala_seq.size()):
        yield scala_seq.apply(index)


def _format_name(file_format: str) -> str:
    """Spark's ``ParquetFileFormat``/``CSV``/``JSON``/``Text`` as lotline's format names."""
    lowered = file_format.lower()
    for name in ("parquet", "csv", "json", "text", "orc", "avro"):
        if name in lowered:
            return name
    return lowered
