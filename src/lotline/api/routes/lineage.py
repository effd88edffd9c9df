"""``/lineage``, ``/column-lineage`` and ``/search``: reading lineage as a graph."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from lotline.api.deps import Services
from lotline.api.dto import Json, dataset_json, graph_node_json, job_json, time
from lotline.domain.column_lineage import FieldNode
from lotline.domain.graph import GraphNode
from lotline.domain.model import Dataset, Job, Run
from lotline.domain.tags import DatasetTags

router = APIRouter(tags=["lineage"])


@router.get("/lineage")
def lineage_graph(
    nodeId: Annotated[str, Query(min_length=1, max_length=4096)],
    lineage: Services,
    depth: Annotated[int, Query(ge=0, le=100)] = 20,
) -> Json:
    nodes = lineage.graph.lineage(nodeId, depth)
    # A job node carries its latest run (Marquez's UI colours jobs by its state), read for the
    # whole graph at once; no tags or facets: the graph must stay cheap at depth 20.
    jobs = [(n.data.namespace, n.data.name) for n in nodes if isinstance(n.data, Job)]
    latest = lineage.runs.latest_runs(jobs) if jobs else {}
    return {"graph": [graph_node_json(n, _data(n, latest)) for n in nodes]}


def _data(node: GraphNode, latest: dict[tuple[str, str], Run]) -> Json:
    if isinstance(node.data, Dataset):
        return dataset_json(node.data, DatasetTags())
    return job_json(node.data, latest.get((node.data.namespace, node.data.name)), {})


@router.get("/column-lineage")
def column_lineage(
    nodeId: Annotated[str, Query(min_length=1, max_length=4096)],
    lineage: Services,
    depth: Annotated[int, Query(ge=0, le=100)] = 20,
    withDownstream: bool = False,
) -> Json:
    """Field nodes of a field, a dataset or a job's outputs, ``depth`` edges up (and down with
    ``withDownstream``), from the ``columnLineage`` facets; every edge's two ends are in ``graph``."""
    return {
        "graph": [_field_node_json(n) for n in lineage.graph.column_lineage(nodeId, depth, withDownstream)]
    }


def _field_node_json(node: FieldNode) -> Json:
    ref = node.ref
    return {
        "id": ref.id,
        "type": "DATASET_FIELD",
        "data": {
            "namespace": ref.namespace,
            "dataset": ref.dataset,
            "field": ref.field,
            "fieldType": node.type,
            "inputFields": [
                {
                    "namespace": s.ref.namespace,
                    "dataset": s.ref.dataset,
                    "field": s.ref.field,
                    "transformations": list(s.transformations),
                }
                for s in node.inputs
            ],
        },
        "inEdges": [{"origin": o.id, "destination": d.id} for o, d in node.in_edges],
        "outEdges": [{"origin": o.id, "destination": d.id} for o, d in node.out_edges],
    }


@router.get("/search")
def search(
    q: Annotated[str, Query(min_length=1, max_length=1024)],
    lineage: Services,
    filter: Annotated[str | None, Query(pattern="^(DATASET|JOB)$")] = None,
    sort: Annotated[str, Query(pattern="^(NAME|UPDATE_AT)$")] = "NAME",
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
    namespace: str | None = None,
) -> Json:
    hits, total = lineage.graph.search(q, filter, namespace, sort, limit)
    return {
        "totalCount": total,
        "results": [
            {
                "type": h.type,
                "name": h.name,
                "updatedAt": time(h.updated_at),
                "namespace": h.namespace,
                "nodeId": f"{h.type.lower()}:{h.namespace}:{h.name}",
            }
            for h in hits
        ],
    }
