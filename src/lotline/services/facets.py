"""Every OpenLineage facet lotline writes, built in this one place.

The spec's facets are built with openlineage-python's facet classes (``facet_v2``), which are
generated from the spec's JSON schemas: their ``_schemaURL`` names the schema version each was
generated from and their ``_producer`` is lotline's, by construction, and the same facet never
carries two versions. lotline's own facets (``lotline_*``, ``spark_applicationDetails``) point at
their documentation. Each builder answers the facet as JSON (a plain dict), as events carry it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from openlineage.client.facet_v2 import (
    BaseFacet,
    base_subset_dataset,
    column_lineage_dataset,
    data_quality_assertions_dataset,
    data_quality_metrics_dataset,
    dataset_type_dataset,
    error_message_run,
    job_dependencies_run,
    job_type_job,
    nominal_time_run,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
    storage_dataset,
)
from openlineage.client.serde import Serde

from lotline.domain import failures
from lotline.domain.checks import Verdict
from lotline.domain.failures import Failure
from lotline.domain.lots import IntervalLot, parse_lot
from lotline.domain.manifests import ManifestDraft
from lotline.domain.model import FieldSpec

#: The ``_producer`` of the facets (and ``producer`` of the events) lotline writes itself.
PRODUCER = "https://github.com/lotline/lotline"
#: Where lotline's own facets are described.
CUSTOM_SCHEMA = "https://github.com/lotline/lotline/blob/main/docs/pipelines.md#run-facets"

Facet = dict[str, Any]


def _json(facet: BaseFacet) -> Facet:
    return Serde.to_dict(facet)


def custom(**fields: Any) -> Facet:
    """One of lotline's own facets."""
    return {"_producer": PRODUCER, "_schemaURL": CUSTOM_SCHEMA, **fields}


def error_message(error: BaseException | str | Failure) -> Facet:
    """``errorMessage``: the one-line reason (``domain/failures``) as its message and the stack (a
    Java one included, for Spark's errors; bounded in size) as its ``stackTrace``."""
    failure = failures.failure_of(error)
    return _json(
        error_message_run.ErrorMessageRunFacet(
            message=failure.reason,
            programmingLanguage="python",
            stackTrace=failures.bounded_stack(failure.stack),
            producer=PRODUCER,
        )
    )


def nominal_time(lot: str) -> Facet | None:
    """``nominalTime``: the window of an interval lot (None for a named lot, which has none)."""
    parsed = parse_lot(lot)
    if not isinstance(parsed, IntervalLot):
        return None
    return _json(
        nominal_time_run.NominalTimeRunFacet(
            nominalStartTime=parsed.start.isoformat(),
            nominalEndTime=parsed.end.isoformat(),
            producer=PRODUCER,
        )
    )


def processing_engine(name: str, version: str) -> Facet:
    return _json(
        processing_engine_run.ProcessingEngineRunFacet(version=version, name=name, producer=PRODUCER)
    )


def job_type() -> Facet:
    """``jobType``: every job lotline runs is a batch job of its own integration."""
    return _json(
        job_type_job.JobTypeJobFacet(
            processingType="BATCH", integration="LOTLINE", jobType="JOB", producer=PRODUCER
        )
    )


def parent(run_id: uuid.UUID, namespace: str, job: str) -> Facet:
    """``parent`` of a child run; the parent is also the root (lotline nests one level)."""
    return _json(
        parent_run.ParentRunFacet(
            run=parent_run.Run(runId=str(run_id)),
            job=parent_run.Job(namespace=namespace, name=job),
            root=parent_run.Root(
                run=parent_run.RootRun(runId=str(run_id)),
                job=parent_run.RootJob(namespace=namespace, name=job),
            ),
            producer=PRODUCER,
        )
    )


def job_dependencies(upstream: Iterable[tuple[str, str, uuid.UUID]]) -> Facet:
    """``jobDependencies``: the (namespace, job, run) that produced each input lot: lot lineage."""
    return _json(
        job_dependencies_run.JobDependenciesRunFacet(
            upstream=[
                job_dependencies_run.JobDependency(
                    job=job_dependencies_run.JobIdentifier(namespace=namespace, name=job),
                    run=job_dependencies_run.RunIdentifier(runId=str(run_id)),
                    dependency_type="IMPLICIT_DEPENDENCY",
                    sequence_trigger_rule="FINISH_TO_START",
                    status_trigger_rule="EXECUTE_ON_SUCCESS",
                )
                for namespace, job, run_id in upstream
            ],
            producer=PRODUCER,
        )
    )


def _partitions(lots: Sequence[str]) -> base_subset_dataset.PartitionSubsetCondition:
    return base_subset_dataset.PartitionSubsetCondition(
        partitions=[base_subset_dataset.Partition(dimensions={"lot": lot}, identifier=lot) for lot in lots]
    )


def input_subset(lots: Sequence[str]) -> Facet:
    """``subset`` of an input: the lots read."""
    return _json(
        base_subset_dataset.InputSubsetInputDatasetFacet(inputCondition=_partitions(lots), producer=PRODUCER)
    )


def output_subset(lots: Sequence[str]) -> Facet:
    """``subset`` of an output: the lots written."""
    return _json(
        base_subset_dataset.OutputSubsetOutputDatasetFacet(
            outputCondition=_partitions(lots), producer=PRODUCER
        )
    )


def output_statistics(rows: int | None, size: int, files: int) -> Facet:
    return _json(
        output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=rows, size=size, fileCount=files, producer=PRODUCER
        )
    )


def schema(fields: Sequence[FieldSpec]) -> Facet:
    return _json(
        schema_dataset.SchemaDatasetFacet(
            fields=[schema_dataset.SchemaDatasetFacetFields(name=f.name, type=f.type) for f in fields],
            producer=PRODUCER,
        )
    )


def column_lineage(columns: Mapping[str, Sequence[tuple[str, str, str, str]]]) -> Facet:
    """``columnLineage``: for each output column, its (namespace, dataset, field, subtype) sources,
    each a DIRECT transformation (an empty subtype: none given, not known)."""
    return _json(
        column_lineage_dataset.ColumnLineageDatasetFacet(
            fields={
                column: column_lineage_dataset.Fields(
                    inputFields=[
                        column_lineage_dataset.InputField(
                            namespace=namespace,
                            name=name,
                            field=field,
                            transformations=[
                                column_lineage_dataset.Transformation(
                                    type="DIRECT", subtype=subtype or None, description="", masking=False
                                )
                            ],
                        )
                        for namespace, name, field, subtype in sources
                    ]
                )
                for column, sources in columns.items()
            },
            producer=PRODUCER,
        )
    )


#: The ``storageLayer`` of a dataset that is plain files in a folder (no table format over them).
FILES_LAYER = "files"


def file_dataset(file_format: str) -> dict[str, Facet]:
    """What a dataset of files in a folder is, as dataset facets: ``datasetType`` FILE and
    ``storage`` with its ``fileFormat`` (parquet, csv, …), so readers (the web UI, Marquez) show
    "parquet files" rather than the catalog's generic ``DB_TABLE`` type."""
    return {
        "datasetType": _json(
            dataset_type_dataset.DatasetTypeDatasetFacet(datasetType="FILE", producer=PRODUCER)
        ),
        "storage": _json(
            storage_dataset.StorageDatasetFacet(
                storageLayer=FILES_LAYER, fileFormat=file_format, producer=PRODUCER
            )
        ),
    }


def lot_facets(lot: str) -> dict[str, Facet]:
    """The run facets every run of a lot carries: ``nominalTime`` of an interval lot."""
    window = nominal_time(lot)
    return {} if window is None else {"nominalTime": window}


def statistics_of(draft: ManifestDraft) -> Facet:
    """``outputStatistics`` of what an attempt wrote."""
    return output_statistics(draft.row_count, sum(o.size for o in draft.objects), len(draft.objects))


def version_facets(draft: ManifestDraft, fields: Sequence[FieldSpec]) -> dict[str, Facet]:
    """The facets of the version a lot's run wrote: ``outputStatistics`` and (when the lot had
    data) ``schema``."""
    found = {"outputStatistics": statistics_of(draft)}
    if fields:
        found["schema"] = schema(fields)
    return found


def quality_facets(verdict: Verdict | None) -> dict[str, Facet]:
    """A checked lot's version: ``dataQualityAssertions`` (each check: assertion, success, column)
    and ``dataQualityMetrics`` (the rows the transform made, nulls per column); none unchecked."""
    if verdict is None:
        return {}
    assertions = data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
        assertions=[
            data_quality_assertions_dataset.Assertion(
                assertion=r.name,
                success=r.success,
                column=r.column,
                severity="error" if r.on_fail == "fail" else r.on_fail,
                actual=None if r.failed is None else str(r.failed),
            )
            for r in verdict.results
        ],
        producer=PRODUCER,
    )
    metrics = data_quality_metrics_dataset.DataQualityMetricsDatasetFacet(
        rowCount=verdict.rows,
        columnMetrics={
            column: data_quality_metrics_dataset.ColumnMetrics(nullCount=count)
            for column, count in verdict.null_counts.items()
        },
        producer=PRODUCER,
    )
    return {"dataQualityAssertions": _json(assertions), "dataQualityMetrics": _json(metrics)}
