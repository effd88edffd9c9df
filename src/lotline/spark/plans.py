"""What a Spark write read, and which input columns each written column comes from, from its plan.

The query listener (``spark.capture``) hands over the analyzed plan of an
``InsertIntoHadoopFsRelationCommand``'s query as the JSON facts ``WriteFacts.java`` gathers inside
the JVM in one call (each node's class, output attributes, and for each of its expressions the
attribute it names, how it derives and the attributes it refers to). Files read by the query are
the ``HadoopFsRelation`` leaves of the written query; column lineage follows expression ids down
the plan, the way Spark itself resolves attributes, so it needs no JVM agent (openlineage-spark's
jar does the same in Scala). Leaves that are not files (``createDataFrame``, RDDs, in-memory
tables) have no dataset and are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Transformation(StrEnum):
    """How an output column derives from an input column (OpenLineage ``columnLineage`` subtypes)."""

    IDENTITY = "IDENTITY"
    TRANSFORMATION = "TRANSFORMATION"
    AGGREGATION = "AGGREGATION"
    #: A direct source whose subtype is not known (``spark.sql`` text parsed on a Connect client):
    #: a DIRECT transformation without subtype; any step after it leaves it unknown.
    UNSPECIFIED = ""


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
_STRENGTH = {
    Transformation.IDENTITY: 0,
    Transformation.TRANSFORMATION: 1,
    Transformation.AGGREGATION: 2,
    Transformation.UNSPECIFIED: 3,
}


def write_plan(query: Mapping[str, Any]) -> WritePlan:
    """The reads and column lineage of a write, from the facts of its query (``WriteFacts.java``)."""
    reads: list[FileRead] = []
    sources = _walk(query, reads)
    columns = {}
    for name, expr_id, *_ in query["output"]:  # a relation's attributes also have their type
        found = sorted(sources.get(expr_id, {}).items())
        columns[name] = tuple(ColumnSource(read, field, kind) for (read, field), kind in found)
    return WritePlan(tuple(reads), columns)


def _walk(node: Mapping[str, Any], reads: list[FileRead]) -> _Sources:
    """The sources of every attribute ``node`` outputs (and of those its children output)."""
    if node["kind"] == "LogicalRelation":
        return _relation(node, reads)
    children = [_walk(child, reads) for child in node["children"]]
    below: _Sources = {}
    for child in children:
        below.update(child)
    if node["kind"] == "Union":
        return _union(node, children, below)
    produced: _Sources = {}
    expressions = node["expressions"]
    named = {e["named"]: e for e in reversed(expressions) if e["named"] is not None}
    for _, expr_id in node["output"]:
        if expr_id in below:
            continue
        # A column the node makes (Project, Aggregate, Window: its named expression; Generate and
        # others: from everything the node's expressions refer to).
        derived_from = [named[expr_id]] if expr_id in named else expressions
        produced[expr_id] = _derive(derived_from, below)
    below.update(produced)
    return below


def _relation(node: Mapping[str, Any], reads: list[FileRead]) -> _Sources:
    if "format" not in node:
        return {}  # not files
    index = len(reads)
    reads.append(
        FileRead(
            uris=tuple(node["paths"]),
            format=_format_name(node["format"]),
            fields=tuple((name, type_) for name, _, type_ in node["output"]),
        )
    )
    return {expr_id: {(index, name): Transformation.IDENTITY} for name, expr_id, _ in node["output"]}


def _union(node: Mapping[str, Any], children: list[_Sources], below: _Sources) -> _Sources:
    """A union's columns are its first child's attributes; the others' columns match by position."""
    child_outputs = [child["output"] for child in node["children"]]
    for position, (_, expr_id) in enumerate(node["output"]):
        merged: dict[tuple[int, str], Transformation] = {}
        for outputs, sources in zip(child_outputs, children, strict=True):
            if position < len(outputs):
                _merge(merged, sources.get(outputs[position][1], {}))
        below[expr_id] = merged
    return below


def _derive(expressions: list[Mapping[str, Any]], below: _Sources) -> dict[tuple[int, str], Transformation]:
    derived: dict[tuple[int, str], Transformation] = {}
    for expression in expressions:
        kind = Transformation(expression["how"])
        for reference in expression["references"]:
            for source, inner in below.get(reference, {}).items():
                _merge(derived, {source: max(inner, kind, key=_STRENGTH.__getitem__)})
    return derived


def _merge(into: dict[tuple[int, str], Transformation], more: dict[tuple[int, str], Transformation]) -> None:
    for source, kind in more.items():
        known = into.get(source)
        into[source] = kind if known is None else max(known, kind, key=_STRENGTH.__getitem__)


def _format_name(file_format: str) -> str:
    """Spark's ``ParquetFileFormat``/``CSV``/``JSON``/``Text`` as lotline's format names."""
    lowered = file_format.lower()
    for name in ("parquet", "csv", "json", "text", "orc", "avro"):
        if name in lowered:
            return name
    return lowered
