"""``/lineage``, ``/column-lineage`` and ``/search``: reading lineage as a graph."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from lotline.api.deps import Services
from lotline.api.dto import Json, dataset_json, graph_node_json, job_json, time
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
    """Field nodes of one dataset, with edges from its ``columnLineage`` facet (one level)."""
    dataset_id = nodeId.split("#", 1)[0]
    if dataset_id.startswith("datasetField:"):
        dataset_id = "dataset:" + dataset_id.removeprefix("datasetField:").rsplit(":", 1)[0]
    elif dataset_id.startswith("job:"):
        return {"graph": []}
    dataset = lineage.graph.dataset(dataset_id)
    return {"graph": _field_nodes(dataset)}


def _field_id(field: dict[str, Any]) -> str:
    return f"datasetField:{field.get('namespace')}:{field.get('name')}:{field.get('field')}"


def _field_nodes(dataset: Dataset) -> list[Json]:
    facet: Any = dataset.facets.get("columnLineage")
    lineage_fields: dict[str, Any] = facet.get("fields", {}) if isinstance(facet, dict) else {}
    nodes = []
    for field in dataset.fields:
        node_id = f"datasetField:{dataset.namespace}:{dataset.name}:{field.name}"
        entry = lineage_fields.get(field.name)
        inputs = entry.get("inputFields", []) if isinstance(entry, dict) else []
        in_edges = [{"origin": _field_id(i), "destination": node_id} for i in inputs if isinstance(i, dict)]
        nodes.append(
            {
                "id": node_id,
                "type": "DATASET_FIELD",
                "data": {
                    "namespace": dataset.namespace,
                    "dataset": dataset.name,
                    "field": field.name,
                    "fieldType": field.type,
                    "inputFields": inputs,
                },
                "inEdges": in_edges,
                "outEdges": [],
            }
        )
    return nodes


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
