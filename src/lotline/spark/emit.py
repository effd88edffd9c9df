"""Each lot's run as OpenLineage events, for a consumer other than lotline (Marquez, DataHub, another
lotline): ``LOTLINE_OPENLINEAGE_URL`` (and ``LOTLINE_OPENLINEAGE_API_KEY``) turn it on.

One OpenLineage run per lot, with lotline's run id: START when the lot starts (its inputs, each
with the input lots it reads as a ``subset`` facet), COMPLETE or FAIL at its end (the output with
its lot as a ``subset`` facet, ``outputStatistics`` and ``schema``; the ``errorMessage`` of a
failure). Dataset names are lotline's — the pipeline's namespace and the dataset's name — so they
are the same for every lot: the lot goes into the subset facets (``PartitionSubsetCondition``),
never into the name, which is what fragments openlineage-spark's graphs into one dataset per
partition path. Emitting is best effort: a consumer that is down or refuses an event is logged and
never fails the lot (the client is given a short timeout and one retry, so a dead endpoint costs a
lot about two seconds, not the client's default of five retries).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lotline.domain.coordination import LotClaim
from lotline.domain.lots import IntervalLot, parse_lot
from lotline.domain.manifests import ManifestDraft
from lotline.domain.model import FieldSpec
from lotline.services.config import Settings
from lotline.services.lots import PRODUCER
from lotline.spark.failures import failure_of
from lotline.spark.pipeline import JobSpec

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient

log = logging.getLogger(__name__)
TIMEOUT_S = 2.0
_FACETS = "https://openlineage.io/spec/facets/"


def emitter_for(settings: Settings, spark_version: str) -> OpenLineageEmitter | None:
    """The configured emitter, or None when ``LOTLINE_OPENLINEAGE_URL`` is not set."""
    if not settings.openlineage_url:
        return None
    return OpenLineageEmitter(
        settings.openlineage_url, settings.openlineage_api_key, spark_version=spark_version
    )


class OpenLineageEmitter:
    """Posts a lot's START and COMPLETE/FAIL events; never raises."""

    def __init__(self, url: str, api_key: str | None = None, *, spark_version: str = "") -> None:
        from openlineage.client import OpenLineageClient
        from openlineage.client.transport.http import (
            ApiKeyTokenProvider,
            HttpConfig,
            HttpTransport,
            TokenProvider,
        )

        config = HttpConfig(
            url=url,
            timeout=TIMEOUT_S,
            auth=ApiKeyTokenProvider({"apiKey": api_key}) if api_key else TokenProvider({}),
            retry={"total": 1, "backoff_factor": 0.1, "status_forcelist": [502, 503, 504]},
        )
        self._client: OpenLineageClient = OpenLineageClient(transport=HttpTransport(config))
        self._spark_version = spark_version

    def started(self, job: JobSpec, claim: LotClaim) -> None:
        inputs = [
            _dataset(
                claim.namespace,
                spec.name,
                "inputFacets",
                "Input",
                [lot for d, lot in claim.input_lots if d == spec.name],
            )
            for spec in job.inputs
        ]
        self._emit("START", job, claim, run_facets=self._start_facets(claim), inputs=inputs)

    def ended(
        self,
        job: JobSpec,
        claim: LotClaim,
        *,
        draft: ManifestDraft | None,
        fields: Sequence[FieldSpec] = (),
        error: BaseException | None = None,
    ) -> None:
        if error is not None:
            failure = failure_of(error)
            facet = _facet(
                "ErrorMessageRunFacet",
                "1-0-1",
                message=failure.reason,
                programmingLanguage="python",
                stackTrace=failure.stack,
            )
            self._emit("FAIL", job, claim, run_facets={"errorMessage": facet})
            return
        output = _dataset(claim.namespace, job.output.name, "outputFacets", "Output", [claim.lot])
        if draft is not None:
            output["outputFacets"]["outputStatistics"] = _facet(
                "OutputStatisticsOutputDatasetFacet",
                "1-0-2",
                rowCount=draft.row_count,
                size=sum(o.size for o in draft.objects),
                fileCount=len(draft.objects),
            )
        if fields:
            output["facets"]["schema"] = _facet(
                "SchemaDatasetFacet", "1-1-1", fields=[{"name": f.name, "type": f.type} for f in fields]
            )
        self._emit("COMPLETE", job, claim, outputs=[output])

    def _start_facets(self, claim: LotClaim) -> dict[str, Any]:
        facets: dict[str, Any] = {
            "processing_engine": _facet(
                "ProcessingEngineRunFacet", "1-1-1", version=self._spark_version, name="spark"
            )
        }
        lot = parse_lot(claim.lot)
        if isinstance(lot, IntervalLot):
            facets["nominalTime"] = _facet(
                "NominalTimeRunFacet",
                "1-0-1",
                nominalStartTime=lot.start.isoformat(),
                nominalEndTime=lot.end.isoformat(),
            )
        return facets

    def _emit(
        self,
        event_type: str,
        job: JobSpec,
        claim: LotClaim,
        *,
        run_facets: dict[str, Any] | None = None,
        inputs: list[dict[str, Any]] | None = None,
        outputs: list[dict[str, Any]] | None = None,
    ) -> None:
        from openlineage.client.event_v2 import RunEvent

        document = {
            "eventType": event_type,
            "eventTime": datetime.now(UTC).isoformat(),
            "producer": PRODUCER,
            "run": {"runId": str(claim.run_id), "facets": run_facets or {}},
            "job": {
                "namespace": claim.namespace,
                "name": job.name,
                "facets": {
                    "jobType": _facet(
                        "JobTypeJobFacet",
                        "2-0-3",
                        processingType="BATCH",
                        integration="LOTLINE",
                        jobType="JOB",
                    )
                },
            },
            "inputs": inputs or [],
            "outputs": outputs or [],
        }
        try:
            event = _structure(RunEvent, document)
            self._client.emit(event)
        except Exception as failure:  # a consumer that is down never fails the lot
            log.warning(
                "OpenLineage %s of job %s lot %s not emitted: %s", event_type, job.name, claim.lot, failure
            )


def _structure(kind: Any, document: dict[str, Any]) -> Any:
    """The client's typed event from its JSON form (facets stay plain dicts, which it serializes)."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run

    job = document["job"]
    return kind(
        eventType=document["eventType"],
        eventTime=document["eventTime"],
        producer=document["producer"],
        run=Run(runId=document["run"]["runId"], facets=document["run"]["facets"]),
        job=Job(namespace=job["namespace"], name=job["name"], facets=job["facets"]),
        inputs=[
            InputDataset(d["namespace"], d["name"], facets=d["facets"], inputFacets=d["inputFacets"])
            for d in document["inputs"]
        ],
        outputs=[
            OutputDataset(d["namespace"], d["name"], facets=d["facets"], outputFacets=d["outputFacets"])
            for d in document["outputs"]
        ],
    )


def _dataset(namespace: str, name: str, key: str, side: str, lots: Sequence[str]) -> dict[str, Any]:
    """A dataset under its stable name, the lots read or written as its ``subset`` facet."""
    condition = {
        "type": "partition",
        "partitions": [{"identifier": lot, "dimensions": {"lot": lot}} for lot in lots],
    }
    subset = _facet(
        f"BaseSubsetDatasetFacet.json#/$defs/{side}Subset{side}DatasetFacet",
        "1-0-0",
        **{f"{side.lower()}Condition": condition},
    )
    return {"namespace": namespace, "name": name, "facets": {}, key: {"subset": subset}}


def _facet(facet: str, spec_version: str, /, **fields: Any) -> dict[str, Any]:
    schema = facet if ".json" in facet else f"{facet}.json"
    return {"_producer": PRODUCER, "_schemaURL": f"{_FACETS}{spec_version}/{schema}", **fields}
