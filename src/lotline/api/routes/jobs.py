"""``/jobs`` and ``/namespaces/{ns}/jobs``: jobs, job versions, and creating and listing runs."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Response

from lotline.api.deps import Page, Services
from lotline.api.dto import JobIn, Json, RunIn, job_json, job_version_json, run_json
from lotline.domain.model import DatasetRef, Job
from lotline.services import Lineage

router = APIRouter(tags=["jobs"])
JOB = "/namespaces/{namespace:seg}/jobs/{job:seg}"


def present_all(lineage: Lineage, jobs: list[Job]) -> list[Json]:
    """Jobs as Marquez shows them, with their latest runs read for all of them at once."""
    latest = lineage.runs.latest_runs([(j.namespace, j.name) for j in jobs])
    return [job_json(j, latest.get((j.namespace, j.name)), j.facets) for j in jobs]


def present(lineage: Lineage, job: Job) -> Json:
    return present_all(lineage, [job])[0]


@router.get("/jobs")
def list_all_jobs(lineage: Services, page: Page) -> Json:
    found = lineage.catalog.list_jobs(None, page.limit, page.offset)
    return {"jobs": present_all(lineage, list(found.items)), "totalCount": found.total_count}


@router.get("/namespaces/{namespace:seg}/jobs")
def list_jobs(namespace: str, lineage: Services, page: Page) -> Json:
    found = lineage.catalog.list_jobs(namespace, page.limit, page.offset)
    return {"jobs": present_all(lineage, list(found.items)), "totalCount": found.total_count}


@router.get(JOB)
def get_job(namespace: str, job: str, lineage: Services) -> Json:
    """Marquez's job, and lotline's ``freshness`` of its output (null for a lineage-only job)."""
    return {
        **present(lineage, lineage.catalog.get_job(namespace, job)),
        "freshness": lineage.gaps.freshness(namespace, job=job),
    }


@router.put(JOB)
def put_job(namespace: str, job: str, body: JobIn, lineage: Services) -> Json:
    """With ``runId`` (dynamic capture) the inputs and outputs also become that run's (seed 003).
    Before the job has a run, the answer lists no outputs, as Marquez's does."""
    found = lineage.catalog.upsert_job(
        namespace,
        job,
        type=body.type,
        inputs=[DatasetRef(d.namespace, d.name) for d in body.inputs],
        outputs=[DatasetRef(d.namespace, d.name) for d in body.outputs],
        location=body.location,
        description=body.description,
        run_id=body.runId,
    )
    answer = present(lineage, found)
    if answer["latestRun"] is None:
        # As Marquez answers it (MarquezAppIntegrationTest.testApp_createJobAndMarkRunAsComplete):
        # the declared inputs, and no outputs until a run writes them (docs/api.md).
        answer["outputs"] = []
    return answer


@router.delete(JOB)
def delete_job(namespace: str, job: str, lineage: Services) -> Json:
    """Soft delete, as Marquez: hidden until written again; answers it as it was."""
    return present(lineage, lineage.catalog.delete_job(namespace, job))


@router.post(JOB + "/tags/{tag:seg}")
def tag_job(namespace: str, job: str, tag: str, lineage: Services) -> Json:
    lineage.tags.tag_job(namespace, job, tag)
    return get_job(namespace, job, lineage)


@router.delete(JOB + "/tags/{tag:seg}")
def untag_job(namespace: str, job: str, tag: str, lineage: Services) -> Json:
    lineage.tags.tag_job(namespace, job, tag, remove=True)
    return get_job(namespace, job, lineage)


@router.get(JOB + "/versions")
def list_job_versions(namespace: str, job: str, lineage: Services, page: Page) -> Json:
    found = lineage.catalog.list_job_versions(namespace, job, page.limit, page.offset)
    latest = lineage.runs.latest_runs_of_versions(namespace, job, [v.id for v in found.items])
    versions = [job_version_json(v, latest.get(v.id)) for v in found.items]
    return {"versions": versions, "totalCount": found.total_count}


@router.get(JOB + "/versions/{version}")
def get_job_version(namespace: str, job: str, version: uuid.UUID, lineage: Services) -> Json:
    found = lineage.catalog.get_job_version(namespace, job, version)
    latest = lineage.runs.latest_runs_of_versions(namespace, job, [found.id])
    return job_version_json(found, latest.get(found.id))


@router.post(JOB + "/runs", status_code=201)
def create_run(namespace: str, job: str, body: RunIn, lineage: Services, response: Response) -> Json:
    run = lineage.runs.create_run(
        namespace,
        job,
        run_id=body.id,
        nominal_start_time=body.nominalStartTime,
        nominal_end_time=body.nominalEndTime,
        args=dict(body.args or {}),
    )
    response.headers["Location"] = f"/api/v1/jobs/runs/{run.id}"
    return run_json(run)


@router.get(JOB + "/runs")
def list_runs(namespace: str, job: str, lineage: Services, page: Page) -> Json:
    found = lineage.runs.list_runs(namespace, job, page.limit, page.offset)
    return {"runs": [run_json(r, listed=True) for r in found.items], "totalCount": found.total_count}
