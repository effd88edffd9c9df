"""The catalog's pages: namespaces with their jobs and datasets, search, a job, a dataset, a run
and the raw OpenLineage events. Every list is paged and filtered on the server."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from lotline.domain.checks import CHECKS_FACET
from lotline.domain.column_lineage import column_sources
from lotline.domain.coordination import Role
from lotline.domain.errors import Conflict, InvalidInput
from lotline.domain.gaps import STATUSES_OF, GapState
from lotline.domain.graph import NodeKey, NodeType
from lotline.domain.grid import Health, run_trouble
from lotline.domain.model import DatasetVersion, FieldSpec, Job
from lotline.domain.quality import run_reports
from lotline.domain.runs import LOG_FACET, RunState
from lotline.domain.versions import VersionState
from lotline.services import Lineage
from lotline.services.gaps import MAX_NAMESPACE_JOBS
from lotline.services.openlineage import EVENT_TYPES
from lotline.web.params import Pager, choices, instant, text
from lotline.web.render import page

router = APIRouter(include_in_schema=False)

# Names are one path segment each (``seg``: slashes inside a name arrive encoded, see api/paths.py).
JOB = "/jobs/{namespace:seg}/{job:seg}"
DATASET = "/datasets/{namespace:seg}/{dataset:seg}"


@router.get("/", response_class=HTMLResponse)
async def home(request: Request) -> HTMLResponse:
    """What needs attention in one namespace: its jobs, most troubled first, each with the health
    of its lots (the grid's states and totals) beside its latest run's state; then its datasets."""
    params = request.query_params

    def build(lineage: Lineage) -> dict[str, Any]:
        known = lineage.catalog.list_namespaces(limit=1000).items
        namespace = text(params, "ns")
        if namespace is None and known:  # the one most recently written to
            namespace = max(known, key=lambda n: n.updated_at).name
        if namespace is None:
            return {"ns": None}
        lineage.catalog.get_namespace(namespace)
        jobs_at, datasets_at = Pager.of(params, "jobs"), Pager.of(params, "datasets")
        everything = lineage.catalog.list_jobs(namespace, MAX_NAMESPACE_JOBS, 0)
        health = {
            h.job: h for h in lineage.gaps.namespace_health(namespace, now=lineage.clock.now()) if h.job
        }
        # Most troubled first, by name among equals: a job without lots (lineage only, e.g. a dbt
        # model) by its latest run, a failed one among the jobs with failed lots.
        lineage_only = [(j.namespace, j.name) for j in everything.items if j.name not in health]
        states = lineage.runs.latest_states(lineage_only) if lineage_only else {}

        def trouble(job: Job) -> tuple[int, ...]:
            if job.name in health:
                return health[job.name].trouble
            state = states.get((job.namespace, job.name))
            return run_trouble(state.value if state else None)

        ordered = sorted(everything.items, key=lambda j: (trouble(j), j.name))
        jobs = ordered[jobs_at.offset : jobs_at.offset + jobs_at.limit]
        datasets = lineage.catalog.list_datasets(namespace, datasets_at.limit, datasets_at.offset)
        return {
            "ns": namespace,
            "jobs": jobs,
            "jobs_at": jobs_at.counted(min(everything.total_count, MAX_NAMESPACE_JOBS)),
            "jobs_cut": everything.total_count > MAX_NAMESPACE_JOBS,
            "health": health,
            "latest": lineage.runs.latest_runs([(j.namespace, j.name) for j in jobs]),
            "datasets": datasets.items,
            "datasets_at": datasets_at.counted(datasets.total_count),
        }

    return await page(request, "home.html", build)


@router.get("/search", response_class=HTMLResponse)
async def search(request: Request) -> HTMLResponse:
    params = request.query_params

    def build(lineage: Lineage) -> dict[str, Any]:
        query = text(params, "q")
        if query is None:
            return {"q": "", "hits": [], "total": 0}
        hits, total = lineage.graph.search(query, namespace=text(params, "ns"), limit=100)
        return {"q": query, "hits": hits, "total": total}

    return await page(request, "search.html", build)


def _runs(lineage: Lineage, request: Request, namespace: str, job: str) -> dict[str, Any]:
    params = request.query_params
    at = Pager.of(params)
    states = choices(params, "state", RunState)
    lot = text(params, "lot")
    found = lineage.runs.list_runs(namespace, job, at.limit, at.offset, states=states, lot=lot)
    return {
        "runs": found.items,
        "runs_at": at.counted(found.total_count),
        "run_states": list(RunState),
        "chosen_states": states,
        "lot": lot or "",
    }


@router.get(JOB, response_class=HTMLResponse)
async def job_page(request: Request, namespace: str, job: str) -> HTMLResponse:
    def build(lineage: Lineage) -> dict[str, Any]:
        found = lineage.catalog.get_job(namespace, job)
        try:
            health: Health | None = lineage.gaps.health(namespace, job=job, now=lineage.clock.now())
        except Conflict:  # not registered for lot coordination: a lineage-only job
            health = None
        return {
            "ns": namespace,
            "job": found,
            "latest": lineage.runs.latest_states([(namespace, job)]).get((namespace, job)),
            "versions": lineage.catalog.list_job_versions(namespace, job, limit=10).items,
            "facets": lineage.openlineage.job_facets(namespace, job),
            "health": health,
            **_runs(lineage, request, namespace, job),
        }

    return await page(request, "job.html", build)


@router.get(JOB + "/runs", response_class=HTMLResponse)
async def job_runs(request: Request, namespace: str, job: str) -> HTMLResponse:
    """The job page's run history alone: what its filters and pager swap in."""

    def build(lineage: Lineage) -> dict[str, Any]:
        return {
            "ns": namespace,
            "job": lineage.catalog.get_job(namespace, job),
            **_runs(lineage, request, namespace, job),
        }

    return await page(request, "_runs.html", build)


def _versions(lineage: Lineage, request: Request, namespace: str, dataset: str) -> dict[str, Any]:
    params = request.query_params
    at = Pager.of(params)
    states = choices(params, "state", VersionState)
    lot = text(params, "lot")
    found = lineage.versions.list_versions(namespace, dataset, lot, at.limit, at.offset, states=states)
    return {
        "versions": found.items,
        "versions_at": at.counted(found.total_count),
        "version_states": list(VersionState),
        "chosen_states": states,
        "lot": lot or "",
    }


@router.get(DATASET, response_class=HTMLResponse)
async def dataset_page(request: Request, namespace: str, dataset: str) -> HTMLResponse:
    params = request.query_params

    def build(lineage: Lineage) -> dict[str, Any]:
        found = lineage.catalog.get_dataset(namespace, dataset)
        key = NodeKey(NodeType.DATASET, namespace, dataset)
        jobs = [n for n in lineage.graph.lineage(key.id, depth=1) if n.key.type is NodeType.JOB]
        lots_at = Pager.of(params, "lots")
        chosen = choices(params, "lot_state", GapState)
        if any(state not in STATUSES_OF for state in chosen):
            raise InvalidInput(
                f"lot_state must be among {', '.join(STATUSES_OF)}; blocked lots are missing or failed."
            )
        lots = lineage.lots.status_page(
            namespace,
            dataset=dataset,
            role=Role.OUTPUT,
            statuses=[s for state in chosen for s in STATUSES_OF[state]],
            limit=lots_at.limit,
            offset=lots_at.offset,
        )
        return {
            "ns": namespace,
            "dataset": found,
            "health": lineage.gaps.health(namespace, dataset=dataset, now=lineage.clock.now()),
            "producers": [n.key for n in jobs if any(e.destination == key.id for e in n.out_edges)],
            "consumers": [n.key for n in jobs if any(e.origin == key.id for e in n.in_edges)],
            "lots": lots.items,
            "words": lineage.gaps.lot_states(namespace, dataset, [row.lot for row in lots.items]),
            "lots_at": lots_at.counted(lots.total_count),
            "lot_states": list(STATUSES_OF),
            "chosen_lot_states": chosen,
            **_versions(lineage, request, namespace, dataset),
        }

    return await page(request, "dataset.html", build)


@router.get(DATASET + "/versions", response_class=HTMLResponse)
async def dataset_versions(request: Request, namespace: str, dataset: str) -> HTMLResponse:
    def build(lineage: Lineage) -> dict[str, Any]:
        found = lineage.catalog.get_dataset(namespace, dataset)
        return {"ns": namespace, "dataset": found, **_versions(lineage, request, namespace, dataset)}

    return await page(request, "_versions.html", build)


@router.get(DATASET + "/versions/{version:seg}", response_class=HTMLResponse)
async def version_page(request: Request, namespace: str, dataset: str, version: str) -> HTMLResponse:
    """One version of a dataset: what wrote it, its quality results (those the run that wrote it
    and the runs that read or tested it reported for it), its schema and facets."""

    def build(lineage: Lineage) -> dict[str, Any]:
        found = lineage.versions.get_version(namespace, dataset, _version_id(version))
        return {
            "ns": namespace,
            "dataset": lineage.catalog.get_dataset(namespace, dataset),
            "version": found,
            "quality": lineage.versions.quality(found),
        }

    return await page(request, "version.html", build)


@router.get(DATASET + "/columns", response_class=HTMLResponse)
async def dataset_columns(request: Request, namespace: str, dataset: str) -> HTMLResponse:
    """Column lineage: the columns of a version of the dataset (its latest successful one unless
    ``?version=``) and where each comes from, read from the ``columnLineage`` facet it was written
    with (else the dataset's own)."""
    params = request.query_params

    def build(lineage: Lineage) -> dict[str, Any]:
        found = lineage.catalog.get_dataset(namespace, dataset)
        asked = text(params, "version")
        version: DatasetVersion | None
        if asked is not None:
            version = lineage.versions.get_version(namespace, dataset, _version_id(asked))
        else:
            version = lineage.versions.current_version(namespace, dataset)
        own = bool(version and version.facets.get("columnLineage"))
        facets = version.facets if version and own else found.facets
        schema = version.fields if version and version.fields else found.fields
        sources = column_sources(facets)
        named = {f.name for f in schema}
        return {
            "ns": namespace,
            "dataset": found,
            "version": version,
            "recent": lineage.versions.list_versions(namespace, dataset, limit=20).items,
            # Every column the schema or the column lineage names: a producer's schema may list
            # only some (dbt-ol: the documented ones), or none (SQL parsed by openlineage-sql).
            "fields": [*schema, *(FieldSpec(c, None) for c in sources if c not in named)],
            "sources": sources,
            "from_dataset": "columnLineage" in facets and not own,
        }

    return await page(request, "columns.html", build)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_page(request: Request, run_id: str) -> HTMLResponse:
    def build(lineage: Lineage) -> dict[str, Any]:
        found = lineage.runs.get_run(_run_id(run_id))
        return {
            "ns": found.namespace,
            "run": found,
            "error": found.facets.get("errorMessage"),
            "log": found.facets.get(LOG_FACET),
            "checks": found.facets.get(CHECKS_FACET),
            "quality": run_reports(found),
            "children": lineage.runs.child_runs(found.id),
            "manifests": lineage.manifests.of_run(found.id),
            "events": lineage.openlineage.list_events(limit=50, run_id=found.id).items,
        }

    return await page(request, "run.html", build)


@router.get("/events", response_class=HTMLResponse)
async def events_page(request: Request) -> HTMLResponse:
    """The journaled OpenLineage events as they were sent, newest first, filtered."""
    params = request.query_params

    def build(lineage: Lineage) -> dict[str, Any]:
        at = Pager.of(params)
        event_type = text(params, "type")
        run = text(params, "run")
        found = lineage.openlineage.list_events(
            instant(params, "before"),
            instant(params, "after"),
            at.limit,
            at.offset,
            job_namespace=text(params, "ns"),
            job_name=text(params, "job"),
            event_type=event_type.upper() if event_type else None,
            run_id=None if run is None else _run_id(run),
        )
        return {
            "ns": text(params, "ns"),
            "events": found.items,
            "events_at": at.counted(found.total_count),
            "event_types": EVENT_TYPES,
        }

    return await page(request, "events.html", build)


def _version_id(text_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(text_id)
    except ValueError:
        raise InvalidInput(f"version {text_id[:60]!r} is not a version id (a UUID).") from None


def _run_id(text_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(text_id)
    except ValueError:
        raise InvalidInput(f"{text_id[:60]!r} is not a run id (a UUID).") from None
