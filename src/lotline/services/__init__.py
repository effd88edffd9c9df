"""The use cases: the one API that the CLI, REST API, web UI and Spark runner call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.coordination import DEFAULT_MAX_ATTEMPTS
from lotline.services.arrival import ArrivalPass, ArrivalPolicies
from lotline.services.catalog import CatalogService
from lotline.services.children import ChildWork
from lotline.services.cleanup import CleanupService
from lotline.services.config import DEFAULT_WAREHOUSE, Settings
from lotline.services.emission import Consumer, EmissionService, consumer_for
from lotline.services.gaps import GapService
from lotline.services.graph import GraphService
from lotline.services.ingest import IngestService
from lotline.services.lot_events import LotEventService
from lotline.services.lot_lineage import LotLineageService
from lotline.services.lots import LotService
from lotline.services.manifests import ManifestService
from lotline.services.openlineage import OpenLineageService
from lotline.services.projection import ProjectionService
from lotline.services.reading import ReadingService
from lotline.services.runs import RunService
from lotline.services.sources import SourceService
from lotline.services.tags import TagService
from lotline.services.versions import VersionService
from lotline.services.webhooks import WebhookService
from lotline.storage.objects import Storage
from lotline.store.engine import Store, open_store


@dataclass(frozen=True)
class Lineage:
    """Every lineage use case over one store."""

    store: Store
    catalog: CatalogService
    runs: RunService
    versions: VersionService
    tags: TagService
    graph: GraphService
    openlineage: OpenLineageService
    emission: EmissionService
    lots: LotService
    children: ChildWork
    projection: ProjectionService
    manifests: ManifestService
    lot_events: LotEventService
    lot_lineage: LotLineageService
    ingest: IngestService
    cleanup: CleanupService
    gaps: GapService
    webhooks: WebhookService
    sources: SourceService
    arrival: ArrivalPolicies
    #: Notices the source lots that became due: OVERDUE events, empty declarations by policy.
    arrival_pass: ArrivalPass
    #: Where "now" comes from: what lots are due, freshness (tests pass one they advance).
    clock: Clock
    reading: ReadingService

    @property
    def storage(self) -> Storage:
        return self.manifests.storage

    @classmethod
    def over(
        cls,
        store: Store,
        storage: Storage | None = None,
        storage_options: dict[str, Any] | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        consumer: Consumer | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> Lineage:
        """``storage``: where lots' objects go (by default the local ``./warehouse``);
        ``storage_options``: fsspec options for other ``s3://`` locations (ingest's landing);
        ``clock``: where lot coordination takes the time from (tests pass one they advance);
        ``consumer``: where lotline's own runs are also sent as OpenLineage events;
        ``max_attempts``: failures in a row after which a lot is given up on (``LotService``)."""
        manifests = ManifestService(store, storage or Storage(DEFAULT_WAREHOUSE), clock)
        catalog, lots = (
            CatalogService(store),
            LotService(store, manifests, clock=clock, max_attempts=max_attempts),
        )
        lot_events = LotEventService(store)
        openlineage = OpenLineageService(store, clock)
        emission = EmissionService(openlineage, consumer)
        sources = SourceService(store)
        arrival = ArrivalPolicies(store, clock)
        ingest = IngestService(catalog, lots, manifests, sources, emission, arrival, storage_options)

        def declare_empty(namespace: str, dataset: str, found: Sequence[str], declared_by: str) -> list[str]:
            return ingest.declare_empty(namespace, dataset, found, declared_by).declared

        return cls(
            store,
            catalog,
            RunService(store, clock),
            VersionService(store),
            TagService(store, clock),
            GraphService(store),
            openlineage,
            emission,
            lots,
            ChildWork(store, manifests, emission, clock),
            ProjectionService(store),
            manifests,
            lot_events,
            LotLineageService(store),
            ingest,
            CleanupService(store, manifests),
            GapService(store, lots, clock),
            WebhookService(store, lot_events),
            sources,
            arrival,
            ArrivalPass(store, declare_empty, clock),
            clock,
            ReadingService(store),
        )

    def close(self) -> None:
        self.store.dispose()

    def __enter__(self) -> Lineage:
        """``with open_configured(settings) as lineage:`` — closed (its store disposed) at the end."""
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def open_lineage(
    url: str,
    storage: Storage | None = None,
    storage_options: dict[str, Any] | None = None,
    consumer: Consumer | None = None,
    *,
    create: bool = True,
    clock: Clock = SYSTEM_CLOCK,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> Lineage:
    """Open the store at ``url`` (creating and migrating a new SQLite file unless ``create`` is
    False: then a missing one is ``NoDatabase``) and its use cases."""
    return Lineage.over(
        open_store(url, create=create),
        storage,
        storage_options,
        consumer=consumer,
        clock=clock,
        max_attempts=max_attempts,
    )


def open_configured(settings: Settings, *, create: bool = True, clock: Clock = SYSTEM_CLOCK) -> Lineage:
    """The store and storage that ``settings`` name (``LOTLINE_DB_URL``, ``LOTLINE_WAREHOUSE``…);
    ``create=False`` for commands that only read (SPEC §8: they never create a database)."""
    return open_lineage(
        settings.db_url,
        Storage(settings.warehouse, settings.storage_options()),
        settings.s3_options(),
        consumer_for(settings),
        create=create,
        clock=clock,
        max_attempts=settings.max_attempts,
    )
