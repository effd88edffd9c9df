"""Column lineage as OpenLineage's ``columnLineage`` facet tells it: a dataset's columns (those its
schema lists and those only the facet names), each column's input fields, and the graph of field
nodes (``datasetField:<ns>:<dataset>:<field>``) that ``GET /column-lineage`` answers.

Any producer may send the facet (dbt-ol's schema lists only documented columns while its
``columnLineage`` covers every output column; SQL parsed by openlineage-sql sends no schema at
all), so a column is whatever either names, and malformed entries are skipped, never refused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lotline.domain.errors import InvalidInput
from lotline.domain.model import Dataset, JsonObject

FIELD_PREFIX = "datasetField:"


@dataclass(frozen=True, order=True)
class FieldRef:
    """One column of one dataset, as a field node names it."""

    namespace: str
    dataset: str
    field: str

    @property
    def id(self) -> str:
        return f"{FIELD_PREFIX}{self.namespace}:{self.dataset}:{self.field}"


@dataclass(frozen=True)
class FieldSource:
    """An input field an output column is computed from, and how (the facet's transformations)."""

    ref: FieldRef
    transformations: tuple[JsonObject, ...]

    @property
    def how(self) -> str:
        """``direct identity``, ``indirect filter``, …: each transformation's type and subtype."""
        steps = (
            " ".join(filter(None, (t.get("type"), t.get("subtype")))).lower() for t in self.transformations
        )
        return ", ".join(s for s in steps if s)


@dataclass(frozen=True)
class FieldNode:
    """A node of the column lineage graph: its type when the schema gives one, every input field
    the facet names, and the edges to the nodes of the same answer (origin: the input field)."""

    ref: FieldRef
    type: str | None
    inputs: tuple[FieldSource, ...]
    in_edges: tuple[tuple[FieldRef, FieldRef], ...]
    out_edges: tuple[tuple[FieldRef, FieldRef], ...]


def column_sources(facets: Mapping[str, object]) -> dict[str, tuple[FieldSource, ...]]:
    """Each output column the ``columnLineage`` facet names, with its input fields (a column with
    none listed is still a column)."""
    facet = facets.get("columnLineage")
    fields = facet.get("fields") if isinstance(facet, dict) else None
    found: dict[str, tuple[FieldSource, ...]] = {}
    for column, entry in fields.items() if isinstance(fields, dict) else ():
        if not isinstance(column, str) or not column:
            continue
        inputs = entry.get("inputFields") if isinstance(entry, dict) else None
        sources = []
        for source in inputs if isinstance(inputs, list) else ():
            if not isinstance(source, dict) or not all(
                isinstance(source.get(k), str) and source.get(k) for k in ("namespace", "name", "field")
            ):
                continue
            steps = tuple(t for t in source.get("transformations") or () if isinstance(t, dict))
            sources.append(FieldSource(FieldRef(source["namespace"], source["name"], source["field"]), steps))
        found[column] = tuple(sources)
    return found


def column_names(dataset: Dataset) -> list[str]:
    """The dataset's columns: its schema's fields in order, then those only its ``columnLineage``
    facet names."""
    names = [f.name for f in dataset.fields]
    known = set(names)
    return names + [c for c in column_sources(dataset.facets) if c not in known]


def parse_field_node_id(node_id: str) -> tuple[str, str]:
    """``datasetField:<ns>:<dataset>:<field>`` as the dataset's node id and the field (the field is
    what follows the last ``:``; a ``#version`` suffix is ignored, as for dataset node ids)."""
    rest = node_id.removeprefix(FIELD_PREFIX).split("#", 1)[0]
    dataset_part, _, field = rest.rpartition(":")
    if not field or ":" not in dataset_part:
        raise InvalidInput(
            f"nodeId {node_id!r} is not of the form datasetField:<namespace>:<dataset>:<field>."
        )
    return f"dataset:{dataset_part}", field
