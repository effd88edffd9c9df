"""The use cases: the one API that the CLI, REST API, web UI and Spark runner call."""

from __future__ import annotations

from dataclasses import dataclass

from lotline.services.catalog import CatalogService
from lotline.services.gaps import GapService
from lotline.services.graph import GraphService
from lotline.services.lots import LotService
from lotline.services.openlineage import OpenLineageService
from lotline.services.projection import ProjectionService
from lotline.services.runs import RunService
from lotline.services.tags import TagService
from lotline.services.versions import VersionService
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
    lots: LotService
    projection: ProjectionService
    gaps: GapService

    @classmethod
    def over(cls, store: Store) -> Lineage:
        lots = LotService(store)
        return cls(
            store,
            CatalogService(store),
            RunService(store),
            VersionService(store),
            TagService(store),
            GraphService(store),
            OpenLineageService(store),
            lots,
            ProjectionService(store),
            GapService(store, lots),
        )

    def close(self) -> None:
        self.store.dispose()


def open_lineage(url: str) -> Lineage:
    """Open the store at ``url`` (creating and migrating a new SQLite file) and its use cases."""
    return Lineage.over(open_store(url))
