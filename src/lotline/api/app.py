"""The application factory: ``create_app(settings)`` is what ``lotline serve`` and the tests run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from lotline.api import errors
from lotline.api.guards import BearerAuthMiddleware, BodyLimitMiddleware
from lotline.api.metrics import Metrics, MetricsMiddleware
from lotline.api.paths import EncodedSlashMiddleware
from lotline.api.routes import datasets, jobs, lineage, lots, namespaces, openlineage, runs, tags
from lotline.services import open_lineage
from lotline.services.config import Settings

API_PREFIX = "/api/v1"


def create_app(settings: Settings) -> FastAPI:
    """The API over the store at ``settings.db_url``, opened when the server starts."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.lineage = open_lineage(settings.db_url)
        try:
            yield
        finally:
            app.state.lineage.close()

    app = FastAPI(
        title="lotline",
        summary="Marquez-compatible lineage API and OpenLineage endpoint.",
        version="1",
        lifespan=lifespan,
    )
    app.state.metrics = Metrics()
    errors.install(app)
    for module in (namespaces, datasets, jobs, runs, lineage, tags, openlineage, lots):
        app.include_router(module.router, prefix=API_PREFIX)

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics", tags=["ops"], response_class=PlainTextResponse)
    def metrics() -> str:
        text: str = app.state.metrics.render()
        return text

    # Outermost last: size and auth are checked before anything reads the body or the path.
    app.add_middleware(EncodedSlashMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    app.add_middleware(BearerAuthMiddleware, token=settings.api_token)
    app.add_middleware(BodyLimitMiddleware)
    return app
