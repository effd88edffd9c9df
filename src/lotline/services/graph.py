"""Use cases that read lineage as a graph: the Marquez lineage graph, column lineage, search."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from sqlalchemy import Connection

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

    def dataset(self, node_id: str) -> Dataset:
        """The dataset a ``dataset:`` node id names (column lineage starts from one)."""
        with self._store.read() as connection:
            key, found = _resolve(connection, node_id)
            if key.type is not NodeType.DATASET:
                raise InvalidInput(f"nodeId {node_id!r} does not name a dataset.")
            return graph.load_datasets(connection, [found])[found]


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
