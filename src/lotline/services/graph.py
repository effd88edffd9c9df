"""Use cases that read lineage as a graph: the Marquez lineage graph, column lineage, search."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from sqlalchemy import Connection

from lotline.domain.column_lineage import (
    FIELD_PREFIX,
    FieldNode,
    FieldRef,
    FieldSource,
    column_names,
    column_sources,
    parse_field_node_id,
)
from lotline.domain.errors import InvalidInput, NotFound
from lotline.domain.graph import Edge, GraphNode, NodeKey, NodeType, node_id_candidates
from lotline.domain.model import Dataset, DatasetRef, Job
from lotline.store.engine import Store
from lotline.store.queries import graph
from lotline.store.queries.search import SearchHit, search

MAX_DEPTH = 100
SEARCH_FILTERS = ("DATASET", "JOB")
SEARCH_SORTS = ("NAME", "UPDATE_AT")


class GraphService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def lineage(self, node_id: str, depth: int = 20) -> list[GraphNode]:
        """Every job within ``depth`` job-hops of the node, with all datasets those jobs touch.

        Walked breadth-first, one query per direction per level, so the cost grows with the
        size of the answer, not of the whole graph.
        """
        if not 0 <= depth <= MAX_DEPTH:
            raise InvalidInput(f"depth must be between 0 and {MAX_DEPTH}, got {depth}.")
        with self._store.read() as connection:
            start, start_id = _resolve(connection, node_id)
            job_ids: set[uuid.UUID] = set()
            dataset_ids: set[uuid.UUID] = set()
            edges: set[graph.EdgeRow] = set()
            if start.type is NodeType.JOB:
                job_ids.add(start_id)
                frontier = _expand_jobs(connection, {start_id}, edges, dataset_ids)
            else:
                dataset_ids.add(start_id)
                frontier = {start_id}
            for _ in range(depth):
                found = graph.job_edges_of_datasets(connection, frontier)
                new_jobs = {job for job, _, _ in found} - job_ids
                if not new_jobs:
                    break
                job_ids |= new_jobs
                frontier = _expand_jobs(connection, new_jobs, edges, dataset_ids)
            loaded_datasets = graph.load_datasets(connection, sorted(dataset_ids))
            refs = {i: DatasetRef(d.namespace, d.name) for i, d in loaded_datasets.items()}
            loaded_jobs = graph.load_jobs(connection, sorted(job_ids), sorted(edges), refs)
        return _nodes(loaded_datasets, loaded_jobs, edges)

    def search(
        self,
        query: str,
        kind: str | None = None,
        namespace: str | None = None,
        sort: str = "NAME",
        limit: int = 10,
    ) -> tuple[list[SearchHit], int]:
        if not query or len(query) > 1024:
            raise InvalidInput("q must be between 1 and 1024 characters.")
        if kind is not None and kind not in SEARCH_FILTERS:
            raise InvalidInput(f"filter must be one of {', '.join(SEARCH_FILTERS)}.")
        if sort not in SEARCH_SORTS:
            raise InvalidInput(f"sort must be one of {', '.join(SEARCH_SORTS)}.")
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit must be between 1 and 1000.")
        with self._store.read() as connection:
            return search(connection, query, kind, namespace, sort, limit)

    def column_lineage(self, node_id: str, depth: int = 20, with_downstream: bool = False) -> list[FieldNode]:
        """The field nodes of a field (``datasetField:``), of every column of a dataset, or of every
        column of a job's outputs, and of the input fields they are computed from, ``depth`` edges
        up (and down, ``with_downstream``), read from the datasets' ``columnLineage`` facets."""
        if not 0 <= depth <= MAX_DEPTH:
            raise InvalidInput(f"depth must be between 0 and {MAX_DEPTH}, got {depth}.")
        with self._store.read() as connection:
            walk = _ColumnWalk(connection)
            start = walk.start(node_id)
            return walk.nodes(start, depth, with_downstream)


class _ColumnWalk:
    """Column lineage walked breadth-first over the datasets' ``columnLineage`` facets: up through
    the input fields each column names, down through the outputs of the jobs that read a dataset.
    Datasets are loaded once each, a level's at a time."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.datasets: dict[tuple[str, str], Dataset | None] = {}

    def load(self, names: Iterable[tuple[str, str]]) -> None:
        wanted = {n for n in names if n not in self.datasets}
        if not wanted:
            return
        ids = graph.live_dataset_ids(self.connection, wanted)
        loaded = graph.load_datasets(self.connection, sorted(ids.values()))
        for name in wanted:
            found = ids.get(name)
            self.datasets[name] = loaded.get(found) if found is not None else None

    def dataset(self, ref: FieldRef) -> Dataset | None:
        self.load([(ref.namespace, ref.dataset)])
        return self.datasets[(ref.namespace, ref.dataset)]

    def sources(self, ref: FieldRef) -> tuple[FieldSource, ...]:
        found = self.dataset(ref)
        return column_sources(found.facets).get(ref.field, ()) if found else ()

    def start(self, node_id: str) -> list[FieldRef]:
        if node_id.startswith(FIELD_PREFIX):
            dataset_id, field = parse_field_node_id(node_id)
            key, found = _resolve(self.connection, dataset_id)
            ref = FieldRef(key.namespace, key.name, field)
            dataset = self.dataset(ref)
            if dataset is None or (field not in column_names(dataset) and not self.readers([ref])):
                raise NotFound("Dataset field", node_id.removeprefix(FIELD_PREFIX))
            return [ref]
        key, found = _resolve(self.connection, node_id)
        if key.type is NodeType.DATASET:
            names = [(key.namespace, key.name)]
        else:
            edges = graph.dataset_edges_of_jobs(self.connection, [found])
            outputs = graph.load_datasets(
                self.connection, sorted({d for _, d, role in edges if role not in graph.INPUT_ROLES})
            )
            names = [(d.namespace, d.name) for d in outputs.values()]
        self.load(names)
        return [
            FieldRef(ns, name, column)
            for ns, name in sorted(names)
            for dataset in (self.datasets[(ns, name)],)
            if dataset is not None
            for column in column_names(dataset)
        ]

    def readers(self, frontier: Iterable[FieldRef]) -> set[tuple[FieldRef, FieldRef]]:
        """(input field, output field) of the columns computed from these fields: the outputs of
        the jobs that read their datasets, whose ``columnLineage`` names them."""
        wanted = set(frontier)
        names = {(f.namespace, f.dataset) for f in wanted}
        self.load(names)
        ids = graph.live_dataset_ids(self.connection, names)
        reading = {
            j
            for j, _, role in graph.job_edges_of_datasets(self.connection, ids.values())
            if role in graph.INPUT_ROLES
        }
        written = {
            d
            for _, d, role in graph.dataset_edges_of_jobs(self.connection, reading)
            if role not in graph.INPUT_ROLES
        }
        found: set[tuple[FieldRef, FieldRef]] = set()
        for output in graph.load_datasets(self.connection, sorted(written)).values():
            self.datasets[(output.namespace, output.name)] = output
            for column, sources in column_sources(output.facets).items():
                target = FieldRef(output.namespace, output.name, column)
                found.update((s.ref, target) for s in sources if s.ref in wanted)
        return found

    def nodes(self, start: list[FieldRef], depth: int, with_downstream: bool) -> list[FieldNode]:
        seen = set(start)
        edges: set[tuple[FieldRef, FieldRef]] = set()
        frontier = set(start)
        for _ in range(depth):  # upstream: the input fields each column names
            self.load((f.namespace, f.dataset) for f in frontier)
            found = {(s.ref, f) for f in frontier for s in self.sources(f)}
            edges |= found
            frontier = {origin for origin, _ in found} - seen
            seen |= frontier
            if not frontier:
                break
        frontier = set(start) if with_downstream else set()
        for _ in range(depth if frontier else 0):  # downstream: the columns computed from them
            found = self.readers(frontier)
            edges |= found
            frontier = {target for _, target in found} - seen
            seen |= frontier
            if not frontier:
                break
        self.load((f.namespace, f.dataset) for f in seen)
        ins: dict[FieldRef, list[tuple[FieldRef, FieldRef]]] = {}
        outs: dict[FieldRef, list[tuple[FieldRef, FieldRef]]] = {}
        for edge in sorted(edges):
            outs.setdefault(edge[0], []).append(edge)
            ins.setdefault(edge[1], []).append(edge)
        nodes = []
        for ref in sorted(seen, key=lambda r: r.id):
            dataset = self.dataset(ref)
            types = {f.name: f.type for f in dataset.fields} if dataset else {}
            nodes.append(
                FieldNode(
                    ref,
                    types.get(ref.field),
                    self.sources(ref),
                    tuple(ins.get(ref, ())),
                    tuple(outs.get(ref, ())),
                )
            )
        return nodes


def _resolve(connection: Connection, node_id: str) -> tuple[NodeKey, uuid.UUID]:
    """The first reading of the node id that names an existing dataset or job."""
    candidates = node_id_candidates(node_id)
    for key in candidates:
        if key.type is NodeType.JOB:
            found = graph.job_id(connection, key.namespace, key.name)
        else:
            found = graph.live_dataset_id(connection, key.namespace, key.name)
        if found is not None:
            return key, found
    kind = "Job" if candidates[0].type is NodeType.JOB else "Dataset"
    raise NotFound(kind, node_id.split(":", 1)[1])


def _expand_jobs(
    connection: Connection,
    job_ids: Iterable[uuid.UUID],
    edges: set[graph.EdgeRow],
    dataset_ids: set[uuid.UUID],
) -> set[uuid.UUID]:
    """Add every input and output of these jobs; returns the datasets seen for the first time."""
    found = graph.dataset_edges_of_jobs(connection, job_ids)
    edges.update(found)
    new = {dataset for _, dataset, _ in found} - dataset_ids
    dataset_ids |= new
    return new


def _nodes(
    loaded_datasets: dict[uuid.UUID, Dataset], loaded_jobs: dict[uuid.UUID, Job], edges: set[graph.EdgeRow]
) -> list[GraphNode]:
    dataset_keys = {i: NodeKey(NodeType.DATASET, d.namespace, d.name).id for i, d in loaded_datasets.items()}
    job_keys = {i: NodeKey(NodeType.JOB, j.namespace, j.name).id for i, j in loaded_jobs.items()}
    ins: dict[str, list[Edge]] = {}
    outs: dict[str, list[Edge]] = {}
    for job, dataset, role in sorted(edges):
        if job not in job_keys or dataset not in dataset_keys:
            continue
        j, d = job_keys[job], dataset_keys[dataset]
        edge = Edge(d, j) if role in graph.INPUT_ROLES else Edge(j, d)
        outs.setdefault(edge.origin, []).append(edge)
        ins.setdefault(edge.destination, []).append(edge)
    nodes = [
        GraphNode(NodeKey(NodeType.DATASET, d.namespace, d.name), d, (), ()) for d in loaded_datasets.values()
    ] + [GraphNode(NodeKey(NodeType.JOB, j.namespace, j.name), j, (), ()) for j in loaded_jobs.values()]
    return sorted(
        (
            GraphNode(n.key, n.data, tuple(ins.get(n.key.id, ())), tuple(outs.get(n.key.id, ())))
            for n in nodes
        ),
        key=lambda n: n.key.id,
    )
