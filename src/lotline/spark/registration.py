"""Declaring a pipeline before its lots run: its datasets and jobs for coordination, checked against
what the database and storage already hold, so that a refusal declares nothing."""

from __future__ import annotations

from collections.abc import Sequence

from lotline.domain.errors import NotFound
from lotline.domain.storage_names import check_apart, dataset_prefix
from lotline.services import Lineage
from lotline.services import facets as ol
from lotline.services.sources import NAMED_LOTS, DeclaredDataset
from lotline.spark.pipeline import JobSpec, Pipeline, PipelineError


def register(lineage: Lineage, pipeline: Pipeline, *, running: Sequence[JobSpec] = ()) -> None:
    """Check the pipeline against what exists (``SourceService.check``: intervals, typos, and
    sources nothing fills that a job of ``running``, those about to run, reads; a refusal
    registers nothing), then declare the namespace,
    the datasets and every job for coordination; a job's version follows its code (``code_digest``),
    and a job declared ``on_change="recompute"`` has the lots an older version made reopened.

    A new dataset this pipeline writes is recorded at its storage place; an existing one keeps its
    recorded location (the runner records where it writes when it writes), and a source keeps its
    own: a run with another warehouse rewrites nothing it did not write."""
    catalog, storage, namespace = lineage.catalog, lineage.storage, pipeline.namespace
    produced = {d.name for job in pipeline.jobs.values() for d in job.outputs}
    declared = [
        DeclaredDataset(d.name, str(d.interval) if d.interval else NAMED_LOTS, d.name in produced)
        for d in pipeline.datasets.values()
    ]
    read = {d.name for job in running for d in job.inputs} - produced
    lineage.sources.check(namespace, declared, require_lots=read)
    _check_storage(lineage, pipeline)
    for dataset in pipeline.datasets.values():
        if dataset.arrival is not None and dataset.name in produced:
            raise PipelineError(
                f"dataset {dataset.name}: a job of the pipeline writes it; "
                "only sources have arrival policies."
            )
    catalog.upsert_namespace(namespace, owner_name="lotline")
    for dataset in pipeline.datasets.values():
        kind = ol.file_dataset(dataset.format)  # files of its format, not the catalog's DB_TABLE
        try:
            known = catalog.get_dataset(namespace, dataset.name)
        except NotFound:
            where = storage.dataset_uri(namespace, dataset.name) if dataset.name in produced else None
            catalog.upsert_dataset(namespace, dataset.name, physical_name=where, facets=kind)
            continue
        if any(known.facets.get(name) != facet for name, facet in kind.items()):
            catalog.upsert_dataset(namespace, dataset.name, facets=kind)
    for job in pipeline.ordered_jobs():
        lineage.lots.register_job(
            namespace,
            job.name,
            output=[d.name for d in job.outputs],
            inputs=[d.name for d in job.inputs],
            lot_mapping=job.lot_mapping,
            location=job.location,
            code_digest=job.code_digest,
        )
        if job.on_change == "recompute":
            lineage.gaps.recompute_stale(namespace, job.name)
    for dataset in pipeline.datasets.values():
        if dataset.arrival is not None and dataset.interval is not None:
            lineage.arrival.declare(
                namespace,
                dataset.name,
                dataset.interval,
                late_after=dataset.arrival.late_after,
                absent=dataset.arrival.absent,
                declared_in=f"pipeline {pipeline.name}",
            )


def _check_storage(lineage: Lineage, pipeline: Pipeline) -> None:
    """Refuse, before anything is declared, a dataset name storage refuses and an output whose folder
    overlaps another output's or that of a dataset already produced (``register_job`` checks again,
    in its transaction)."""
    namespace = pipeline.namespace
    for name in pipeline.datasets:
        dataset_prefix(namespace, name)
    outputs = [d.name for job in pipeline.ordered_jobs() for d in job.outputs]
    for index, output in enumerate(outputs):
        check_apart(namespace, output, [(namespace, other) for other in outputs[index + 1 :]])
        lineage.lots.check_output(namespace, output)
