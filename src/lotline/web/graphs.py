"""The lineage graph of a job or dataset, and the lot lineage of one lot: a page that draws the
graph (Cytoscape.js, ``static/ui.js``) from a JSON document served beside it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.concurrency import run_in_threadpool

from lotline.domain.errors import InvalidInput, LotlineError
from lotline.domain.graph import GraphNode, NodeKey, NodeType
from lotline.domain.lot_lineage import LotLineage
from lotline.domain.model import Job
from lotline.services import Lineage
from lotline.web.lots import LOT
from lotline.web.params import integer, text
from lotline.web.render import PENDING_HEADER, failure, lineage_of, page, segment

router = APIRouter(include_in_schema=False)

#: The depth a lineage page opens with, and the most it offers (job hops each way).
DEFAULT_DEPTH = 2
MAX_DEPTH = 20


def node_url(key: NodeKey) -> str:
    kind = "jobs" if key.type is NodeType.JOB else "datasets"
    return f"/{kind}/{segment(key.namespace)}/{segment(key.name)}"


def _node_id(request: Request) -> str:
    found = text(request.query_params, "node")
    if found is None:
        raise InvalidInput("node is required: dataset:<namespace>:<name> or job:<namespace>:<name>.")
    return found


def _named(nodes: list[GraphNode], node_id: str) -> GraphNode:
    """The node ``node_id`` names among ``nodes`` (a ``#version`` suffix is ignored, as the graph does)."""
    return next(n for n in nodes if node_id == n.key.id or node_id.startswith(n.key.id + "#"))


@router.get("/lineage", response_class=HTMLResponse)
async def lineage_page(request: Request) -> HTMLResponse:
    params = request.query_params

    def build(lineage: Lineage) -> dict[str, Any]:
        node = _node_id(request)
        depth = integer(params, "depth", DEFAULT_DEPTH, 0, MAX_DEPTH)
        nodes = lineage.graph.lineage(node, depth)  # refuses an unknown node here, as a page
        start = _named(nodes, node).key
        return {
            "ns": start.namespace,
            "node": start,
            "depth": depth,
            "max_depth": MAX_DEPTH,
            "count": len(nodes),
        }

    return await page(request, "lineage.html", build)


@router.get("/lineage/graph.json")
async def lineage_json(request: Request) -> JSONResponse:
    """Cytoscape elements: jobs (coloured by their latest run's state) and datasets, and their edges."""
    params = request.query_params
    lineage = lineage_of(request)

    pending = 0

    def read() -> dict[str, Any]:
        nonlocal pending
        pending = lineage.projection.catch_up_for_read()
        nodes = lineage.graph.lineage(
            _node_id(request), integer(params, "depth", DEFAULT_DEPTH, 0, MAX_DEPTH)
        )
        jobs = [n.key for n in nodes if n.key.type is NodeType.JOB]
        latest = lineage.runs.latest_states([(k.namespace, k.name) for k in jobs])
        return {"elements": _elements(nodes, latest)}

    response = await _json(read)
    if pending:
        response.headers[PENDING_HEADER] = str(pending)
    return response


#: A graph node's label holds at most this many characters (a node is 170 px wide, 14 px text).
LABEL_CHARS = 22


def node_label(name: str) -> str:
    """A long name's end, which tells it from its neighbours (dbt's names share long prefixes:
    ``shop.main.customer_profile_enriched_with_orders`` and ``…_with_payments``), after an
    ellipsis; the whole name is the node's ``name`` (its tooltip and the side panel)."""
    return name if len(name) <= LABEL_CHARS else "…" + name[-(LABEL_CHARS - 1) :]


def _elements(nodes: list[GraphNode], latest: dict[tuple[str, str], Any]) -> list[dict[str, Any]]:
    elements: list[dict[str, Any]] = []
    present = {n.key.id for n in nodes}
    for node in nodes:
        key = node.key
        state = latest.get((key.namespace, key.name)) if key.type is NodeType.JOB else None
        elements.append(
            {
                "group": "nodes",
                "data": {
                    "id": key.id,
                    "label": node_label(key.name),
                    "name": key.name,
                    "namespace": key.namespace,
                    "kind": key.type.value.lower(),
                    "state": state.value if state else ("NEVER_RUN" if isinstance(node.data, Job) else ""),
                    "url": node_url(key),
                },
            }
        )
    edges = {(e.origin, e.destination) for n in nodes for e in (*n.in_edges, *n.out_edges)}
    for origin, destination in sorted(edges):
        if origin in present and destination in present:
            elements.append(
                {
                    "group": "edges",
                    "data": {"id": f"{origin}>{destination}", "source": origin, "target": destination},
                }
            )
    return elements


@router.get("/lineage/node", response_class=HTMLResponse)
async def node_details(request: Request) -> HTMLResponse:
    """What the graph shows beside itself when a node is clicked."""

    def build(lineage: Lineage) -> dict[str, Any]:
        node = _node_id(request)
        found = _named(lineage.graph.lineage(node, 0), node)
        context: dict[str, Any] = {"node": found, "url": node_url(found.key)}
        if isinstance(found.data, Job):
            key = (found.key.namespace, found.key.name)
            context["latest"] = lineage.runs.latest_states([key]).get(key)
            context["runs"] = lineage.runs.list_runs(*key, 5).items
        return context

    return await page(request, "_node.html", build, fresh=False)


#: The depths a lot's lineage opens with, deepest first: the first whose graph has at most
#: ``QUICK_NODES`` nodes (a browser draws that in well under a second; 900 took seconds).
LOT_DEPTHS = (3, 2, 1)
QUICK_NODES = 200


def _lot_lineage(
    lineage: Lineage, request: Request, namespace: str, dataset: str, lot: str
) -> tuple[LotLineage, int]:
    """The lot's lineage at the depth asked for, or else at the deepest that draws quickly."""
    if text(request.query_params, "depth") is not None:
        depth = integer(request.query_params, "depth", LOT_DEPTHS[0], 1, MAX_DEPTH)
        return lineage.lot_lineage.of_lot(namespace, dataset, lot, depth=depth), depth
    for depth in LOT_DEPTHS:
        found = lineage.lot_lineage.of_lot(namespace, dataset, lot, depth=depth)
        if len(found.lots) + len(found.runs) <= QUICK_NODES:
            break
    return found, depth


@router.get(LOT + "/lineage", response_class=HTMLResponse)
async def lot_lineage_page(request: Request, namespace: str, dataset: str, lot: str) -> HTMLResponse:
    """Which lots of which inputs fed this lot, through which runs and versions, and what read it."""

    def build(lineage: Lineage) -> dict[str, Any]:
        found, depth = _lot_lineage(lineage, request, namespace, dataset, lot)
        return {
            "ns": namespace,
            "dataset": dataset,
            "lot": lot,
            "depth": depth,
            "max_depth": MAX_DEPTH,
            "found": found,
        }

    return await page(request, "lot_lineage.html", build, fresh=False)


@router.get(LOT + "/lineage.json")
async def lot_lineage_json(request: Request, namespace: str, dataset: str, lot: str) -> JSONResponse:
    lineage = lineage_of(request)

    def read() -> dict[str, Any]:
        return {"elements": lot_elements(_lot_lineage(lineage, request, namespace, dataset, lot)[0])}

    return await _json(read)


def lot_elements(found: LotLineage) -> list[dict[str, Any]]:
    elements: list[dict[str, Any]] = []
    for version in found.lots:
        number = f" v{version.version_number}" if version.version_number is not None else ""
        elements.append(
            {
                "group": "nodes",
                "data": {
                    "id": version.key,
                    "label": f"{version.dataset}\n{version.lot}{number}",
                    "namespace": version.namespace,
                    "kind": "lot",
                    "state": version.version_state.value if version.version_state else "",
                    "root": version.key == found.root.key,
                    "url": f"/datasets/{segment(version.namespace)}/{segment(version.dataset)}"
                    f"/lots/{segment(version.lot)}/lineage",
                },
            }
        )
    for run in found.runs:
        elements.append(
            {
                "group": "nodes",
                "data": {
                    "id": run.key,
                    "label": f"{run.job}\n{run.state.value.lower()}",
                    "namespace": run.namespace,
                    "kind": "run",
                    "state": run.state.value,
                    "url": f"/runs/{run.id}",
                },
            }
        )
    elements.extend(_edge(origin, destination) for origin, destination in found.edges)
    return elements


def _edge(origin: str, destination: str) -> dict[str, Any]:
    data = {"id": f"{origin}>{destination}", "source": origin, "target": destination}
    return {"group": "edges", "data": data}


async def _json(read: Callable[[], dict[str, Any]]) -> JSONResponse:
    """A graph document, or the error as ``{code, message}`` (what ``ui.js`` shows in place of the graph)."""
    try:
        return JSONResponse(await run_in_threadpool(read))
    except LotlineError as error:
        status, message = failure(error)
        return JSONResponse({"code": status, "message": message}, status_code=status)
