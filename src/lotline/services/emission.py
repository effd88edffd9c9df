"""lotline's own runs as OpenLineage events: every lot's run (the runner's and ingest's) and every
child run of child work, built here and only here.

Each event is journaled in the local store, where it is listed like any event received
(``GET /api/v1/events/lineage``, the Events page) but stored as already applied: it describes
what lotline recorded directly, so the projector never applies it a second time. With
``LOTLINE_OPENLINEAGE_URL`` the same event is also posted to that consumer (Marquez, DataHub,
another lotline). Both are best effort: a failure is logged and never fails the lot (the client has
a short timeout and one retry, so a dead consumer costs a lot about two seconds).

One OpenLineage run per lot, with lotline's run id: START when it starts (posted then, journaled
with the run's end in one transaction; its inputs, each with
the input lots it reads as a ``subset`` facet, and its output with the lot it writes;
``nominalTime``; ``jobDependencies``: the runs that produced those input lots), COMPLETE or FAIL at
its end (the output with its lot as ``subset``; on COMPLETE ``outputStatistics``, ``schema``,
``columnLineage``; ``errorMessage``). A lotline that receives them reads the lots back from the
subset facets, so its runs and versions are per lot as the sender's (docs/api.md). Dataset names are
lotline's, the same for every lot: the lot is in the subset facets, never in the name. A child
run is a run of the same job with the ``parent`` facet naming the lot's run; it reads what its
parent reads and writes no version of its own, so its events list the inputs only.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from lotline.domain.coordination import LotClaim
from lotline.domain.failures import Failure
from lotline.domain.manifests import ManifestDraft
from lotline.domain.model import JsonObject
from lotline.domain.secrets import masked_text
from lotline.services import facets
from lotline.services.config import Settings
from lotline.services.facets import Facet
from lotline.services.openlineage import OpenLineageService, journal_entry
from lotline.store.queries.events import JournalEntry
from lotline.store.types import utcnow

if TYPE_CHECKING:
    from openlineage.client.event_v2 import RunEvent

log = logging.getLogger(__name__)
#: Seconds the consumer may take to answer one event.
TIMEOUT_S = 2.0


class Consumer(Protocol):
    """Where events go besides the local journal."""

    def emit(self, event: RunEvent) -> None: ...


class HttpConsumer:
    """openlineage-python's HTTP transport to ``url`` (``LOTLINE_OPENLINEAGE_URL``)."""

    def __init__(self, url: str, api_key: str | None = None) -> None:
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
        self._client = OpenLineageClient(transport=HttpTransport(config))

    def emit(self, event: RunEvent) -> None:
        self._client.emit(event)


def consumer_for(settings: Settings) -> Consumer | None:
    """The consumer ``LOTLINE_OPENLINEAGE_URL`` names (and ``LOTLINE_OPENLINEAGE_API_KEY``), if any."""
    if not settings.openlineage_url:
        return None
    return HttpConsumer(settings.openlineage_url, settings.openlineage_api_key)


@dataclass(frozen=True)
class LotEnd:
    """The end of a lot's run as lineage (``EmissionService.completion``): its event, posted once the
    end committed, and the events to journal in the end's transaction (START first)."""

    event_type: str
    claim: LotClaim
    #: None: it could not be built (logged); nothing is posted.
    event: RunEvent | None
    journal: tuple[JournalEntry, ...]


class EmissionService:
    def __init__(self, openlineage: OpenLineageService, consumer: Consumer | None = None) -> None:
        self._openlineage, self.consumer = openlineage, consumer
        #: START events of lots' runs not ended yet, journaled with their end (``_ending``).
        self._starts: dict[uuid.UUID, RunEvent] = {}
        self._starts_lock = threading.Lock()

    def started(
        self,
        claim: LotClaim,
        run_facets: Mapping[str, Facet] | None = None,
        upstream: Sequence[tuple[str, str, uuid.UUID]] = (),
    ) -> None:
        """START of a lot's run: its inputs, ``nominalTime``, ``run_facets`` and, as
        ``jobDependencies``, ``upstream`` (``LotService.read_inputs``: the runs that wrote its input
        versions). Posted to the consumer now; journaled with the run's end, in the transaction of
        its commit (``completion``) or its own (``failed``): a lot's path pays no journal write of
        its own; the journal lists the START when the lot ends."""
        start = {**facets.lot_facets(claim.lot), **(run_facets or {})}
        if upstream:
            start["jobDependencies"] = facets.job_dependencies(upstream)
        try:
            event = _event("START", claim, claim.run_id, start, _inputs(claim), _outputs(claim))
        except Exception:
            log.exception("OpenLineage START of job %s lot %s not journaled", claim.job, claim.lot)
            return
        with self._starts_lock:
            self._starts[claim.run_id] = event
        self._post("START", claim, event)

    def completion(
        self,
        claim: LotClaim,
        written: Mapping[str, tuple[ManifestDraft | None, Mapping[str, Facet]]],
        *,
        run_facets: Mapping[str, Facet] | None = None,
    ) -> LotEnd:
        """COMPLETE of a lot's run, before its commit: each of its output lots, with what was
        ``written`` to it — the manifest draft (its ``outputStatistics``) and the dataset facets, by
        output dataset name; every output alike, the claim's own dataset included, an output not
        listed has neither. The caller journals ``journal`` (START and COMPLETE) in the commit's
        transaction (``LotService.complete``), so a committed lot always has its lineage, then
        calls ``ended`` once it committed; a commit refused leaves the START to ``failed``."""
        outputs = []
        for name, _ in claim.output_datasets:
            output_draft, output_facets = written.get(name, (None, {}))
            output = _output(claim, dict(output_facets), name)
            if output_draft is not None:
                output["outputFacets"]["outputStatistics"] = facets.statistics_of(output_draft)
            outputs.append(output)
        ended = {**facets.lot_facets(claim.lot), **(run_facets or {})}
        return self._ending("COMPLETE", claim, ended, outputs)

    def ended(self, end: LotEnd) -> None:
        """After the end committed with its ``journal``: the START is done with, the end is posted."""
        with self._starts_lock:
            self._starts.pop(end.claim.run_id, None)
        if end.event is not None:
            self._post(end.event_type, end.claim, end.event)

    def failed(
        self,
        claim: LotClaim,
        error: BaseException | str | Failure,
        run_facets: Mapping[str, Facet] | None = None,
    ) -> None:
        """FAIL of a lot's run, with ``errorMessage``."""
        ended = {
            **facets.lot_facets(claim.lot),
            **(run_facets or {}),
            "errorMessage": facets.error_message(error),
        }
        self._end("FAIL", claim, ended, _outputs(claim))

    def part_started(self, claim: LotClaim, run_id: uuid.UUID, part: str) -> None:
        """START of a child run: one part of the claimed lot, under the lot's run."""
        self._send("START", claim, run_id, self._part_facets(claim, part), inputs=_inputs(claim))

    def part_ended(
        self,
        claim: LotClaim,
        run_id: uuid.UUID,
        part: str,
        error: BaseException | str | Failure | None = None,
    ) -> None:
        run_facets = self._part_facets(claim, part)
        if error is not None:
            run_facets["errorMessage"] = facets.error_message(error)
        self._send("COMPLETE" if error is None else "FAIL", claim, run_id, run_facets, inputs=_inputs(claim))

    def _part_facets(self, claim: LotClaim, part: str) -> dict[str, Facet]:
        return {
            **facets.lot_facets(claim.lot),
            "parent": facets.parent(claim.run_id, claim.namespace, claim.job),
            "lotline_part": facets.custom(part=part, attempt=claim.attempt),
        }

    def _ending(
        self, event_type: str, claim: LotClaim, run_facets: Mapping[str, Facet], outputs: Sequence[JsonObject]
    ) -> LotEnd:
        """The end of a lot's run and what to journal with it (its START first); never raises: what
        cannot be built is logged and left out."""
        with self._starts_lock:
            start = self._starts.get(claim.run_id)
        event = None
        try:
            event = _event(event_type, claim, claim.run_id, run_facets, _inputs(claim), outputs)
            journal = tuple(journal_entry(_document(e)) for e in (start, event) if e is not None)
        except Exception:
            log.exception("OpenLineage %s of job %s lot %s not journaled", event_type, claim.job, claim.lot)
            return LotEnd(event_type, claim, None, ())
        return LotEnd(event_type, claim, event, journal)

    def _end(
        self, event_type: str, claim: LotClaim, run_facets: Mapping[str, Facet], outputs: Sequence[JsonObject]
    ) -> None:
        """The end of a lot's run, journaled in a transaction of its own after its START; never raises."""
        end = self._ending(event_type, claim, run_facets, outputs)
        try:
            self._openlineage.record(end.journal)
        except Exception:
            log.exception("OpenLineage %s of job %s lot %s not journaled", event_type, claim.job, claim.lot)
            return
        self.ended(end)

    def _send(
        self,
        event_type: str,
        claim: LotClaim,
        run_id: uuid.UUID,
        run_facets: Mapping[str, Facet],
        *,
        inputs: Sequence[JsonObject] = (),
        outputs: Sequence[JsonObject] = (),
    ) -> None:
        """Journal the event locally (as applied), then post it to the consumer; never raises."""
        try:
            event = _event(event_type, claim, run_id, run_facets, inputs, outputs)
            self._openlineage.record([journal_entry(_document(event))])
        except Exception:
            log.exception("OpenLineage %s of job %s lot %s not journaled", event_type, claim.job, claim.lot)
            return
        self._post(event_type, claim, event)

    def _post(self, event_type: str, claim: LotClaim, event: RunEvent) -> None:
        """Post the event to the consumer, if any; never raises."""
        if self.consumer is None:
            return
        try:
            self.consumer.emit(event)
        except Exception as failure:  # a consumer that is down never fails the lot
            log.warning(
                "OpenLineage %s of job %s lot %s not emitted: %s",
                event_type,
                claim.job,
                claim.lot,
                masked_text(str(failure)),  # a transport's error may quote the URL
            )


def _inputs(claim: LotClaim) -> list[JsonObject]:
    """Each input dataset under its stable name, the lots read as its ``subset`` facet."""
    lots: dict[str, list[str]] = {}
    for dataset, lot in claim.input_lots:
        lots.setdefault(dataset, []).append(lot)
    found = []
    for dataset, read in lots.items():
        entry = _dataset(claim.namespace, dataset, {})
        entry["inputFacets"] = {"subset": facets.input_subset(read)}
        found.append(entry)
    return found


def _output(
    claim: LotClaim, dataset_facets: dict[str, Facet] | None = None, name: str | None = None
) -> dict[str, Any]:
    """The lot's output dataset (``name``, by default the first) under its stable name, the lot
    written as its ``subset`` facet."""
    output = _dataset(claim.namespace, name or claim.dataset, dataset_facets or {})
    output["outputFacets"] = {"subset": facets.output_subset([claim.lot])}
    return output


def _outputs(claim: LotClaim) -> list[dict[str, Any]]:
    """Every output lot of the claim (a job with several outputs writes the same lot of each)."""
    return [_output(claim, None, name) for name, _ in claim.output_datasets]


def _dataset(namespace: str, name: str, dataset_facets: dict[str, Facet]) -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "facets": dataset_facets}


def _event(
    event_type: str,
    claim: LotClaim,
    run_id: uuid.UUID,
    run_facets: Mapping[str, Facet],
    inputs: Sequence[JsonObject],
    outputs: Sequence[JsonObject],
) -> RunEvent:
    """The client's typed event (facets stay the plain dicts built in ``facets``, which the client
    serializes as they are)."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState

    plain_run_facets: Any = dict(run_facets)
    job_facets: Any = {"jobType": facets.job_type()}
    return RunEvent(
        eventType=RunState(event_type),
        eventTime=utcnow().isoformat(),
        producer=facets.PRODUCER,
        run=Run(runId=str(run_id), facets=plain_run_facets),
        job=Job(namespace=claim.namespace, name=claim.job, facets=job_facets),
        inputs=[
            InputDataset(d["namespace"], d["name"], facets=d["facets"], inputFacets=d["inputFacets"])
            for d in inputs
        ],
        outputs=[
            OutputDataset(d["namespace"], d["name"], facets=d["facets"], outputFacets=d["outputFacets"])
            for d in outputs
        ],
    )


def _document(event: RunEvent) -> JsonObject:
    """The event as JSON, exactly as the client posts it."""
    from openlineage.client.serde import Serde

    document: JsonObject = Serde.to_dict(event)
    return document
