"""Lineage graph records and Marquez node ids (``dataset:<ns>:<name>``, ``job:<ns>:<name>``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from lotline.domain.errors import InvalidInput
from lotline.domain.model import Dataset, Job


class NodeType(StrEnum):
    DATASET = "DATASET"
    JOB = "JOB"


_PREFIX = {"dataset": NodeType.DATASET, "job": NodeType.JOB}


@dataclass(frozen=True)
class NodeKey:
    type: NodeType
    namespace: str
    name: str

    @property
    def id(self) -> str:
        return f"{self.type.value.lower()}:{self.namespace}:{self.name}"


def node_id_candidates(node_id: str) -> list[NodeKey]:
    """Every reading of ``node_id``, longest namespace first.

    Namespaces and names may both contain ``:`` (``postgres://host:5432``), so the id alone is
    ambiguous; the caller keeps the first reading that names something that exists. A
    ``#version`` suffix is ignored: the graph is always drawn over current versions.
    """
    if not isinstance(node_id, str) or ":" not in node_id:
        raise InvalidInput(
            f"nodeId {node_id!r} is not of the form dataset:<namespace>:<name> or job:<ns>:<name>."
        )
    kind, rest = node_id.split(":", 1)
    node_type = _PREFIX.get(kind)
    if node_type is None:
        raise InvalidInput(f"nodeId {node_id!r} must start with 'dataset:' or 'job:'.")
    if "#" in rest:
        rest = rest.rsplit("#", 1)[0]
    cuts = [i for i, char in enumerate(rest) if char == ":" and 0 < i < len(rest) - 1]
    if not cuts:
        raise InvalidInput(f"nodeId {node_id!r} has no ':' between namespace and name.")
    return [NodeKey(node_type, rest[:i], rest[i + 1 :]) for i in reversed(cuts)]


@dataclass(frozen=True)
class Edge:
    origin: str
    destination: str


@dataclass(frozen=True)
class GraphNode:
    key: NodeKey
    data: Dataset | Job
    in_edges: tuple[Edge, ...]
    out_edges: tuple[Edge, ...]
