"""The application factory: ``create_app(settings)`` is what ``lotline serve`` and the tests run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from lotline.api import errors, ingest
from lotline.api.deps import read_your_writes
from lotline.api.event_waits import LotEventWatch
from lotline.api.guards import Guard, GuardMiddleware
from lotline.api.ingest import IngestHandler
from lotline.api.metrics import Metrics, MetricsMiddleware, freshness_lines
from lotline.api.paths import EncodedSlashMiddleware
from lotline.api.routes import datasets, gaps, jobs, lineage, lots, namespaces, openlineage, runs, tags
from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.errors import LotlineError
from lotline.server.arrival import ArrivalWatch
from lotline.server.journal import JournalWriter
from lotline.server.projector import SupervisedProjector
from lotline.services import open_configured
from lotline.services.config import Settings, load_settings
from lotline.web import install as install_web_ui

API_PREFIX = "/api/v1"
#: The namespaces whose datasets' freshness ``/metrics`` gives.
MAX_NAMESPACES = 1000


class LotlineApp(FastAPI):
    """FastAPI, except that the two event POSTs skip its middleware and routing: they go to
    ``ingest_path`` (``api/ingest.py``, with the same guards), which carries the event load."""

    ingest_path: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if ingest.handles(scope):
            await self.ingest_path(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


def create_app(settings: Settings, clock: Clock = SYSTEM_CLOCK) -> FastAPI:
    """The API over the store at ``settings.db_url``, opened when the server starts; ``clock``: what
    its pages and reports count up to (tests pass one they set)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        lineage = app.state.lineage = open_configured(settings, clock=clock)
        app.state.lot_event_watch = LotEventWatch(
            lineage.lot_events.last_position, settings.max_event_waiters
        )
        projector = app.state.projector = SupervisedProjector(lineage.store.url)
        projector.start()
        journal = app.state.journal = JournalWriter(lineage.store, on_new=projector.wake)
        arrivals = ArrivalWatch(lineage.arrival_pass)
        arrivals.start()
        try:
            yield
        finally:
            arrivals.stop()
            # Events already handed in are journaled and answered before the projector stops.
            await journal.stop()
            # The group in progress commits; the rest of the journal stays pending for the next start.
            await run_in_threadpool(projector.stop)
            lineage.close()

    app = LotlineApp(
        title="lotline",
        summary="Marquez-compatible lineage API and OpenLineage endpoint.",
        version="1",
        lifespan=lifespan,
    )
    app.state.metrics = Metrics()
    errors.install(app)
    app.include_router(openlineage.router, prefix=API_PREFIX)
    # Marquez's endpoints show the lineage model: each first applies what was journaled before it.
    fresh = [Depends(read_your_writes)]
    for module in (namespaces, datasets, jobs, runs, lineage, tags):
        app.include_router(module.router, prefix=API_PREFIX, dependencies=fresh)
    # Lot coordination reads no projected OpenLineage state.
    app.include_router(lots.router, prefix=API_PREFIX)
    app.include_router(gaps.router, prefix=API_PREFIX)
    install_web_ui(app, token_required=settings.api_token is not None)

    @app.get("/healthz", tags=["ops"], response_model=None)
    def healthz() -> dict[str, object] | JSONResponse:
        """200 when the server and its projector run; 503 "degraded" while the projector is down
        (it is being started again; events are still accepted and journaled). ``pendingEvents``:
        the events journaled and not projected yet (null when the database does not answer)."""
        projector: SupervisedProjector = app.state.projector
        state = {"pid": projector.pid, "restarts": projector.restarts, "alive": projector.alive}
        try:
            pending: int | None = app.state.lineage.projection.backlog()
        except LotlineError:
            pending = None
        if not state["alive"]:
            return JSONResponse(
                {"status": "degraded", "projector": state, "pendingEvents": pending}, status_code=503
            )
        return {"status": "ok", "projector": state, "pendingEvents": pending}

    @app.get("/metrics", tags=["ops"], response_class=PlainTextResponse)
    def metrics() -> str:
        lineage = app.state.lineage
        projection = lineage.projection
        text: str = app.state.metrics.render(
            projection.status(),
            applied=projection.applied_total,
            failed=projection.failed_total,
            event_waiters=app.state.lot_event_watch.waiters,
        )
        now = lineage.clock.now()
        namespaces = lineage.catalog.list_namespaces(limit=MAX_NAMESPACES).items
        healths = [h for n in namespaces for h in lineage.gaps.namespace_health(n.name, now=now) if h.range]
        return text + "\n".join(freshness_lines(healths, now)) + "\n"

    # Outermost last: size and auth are checked before anything reads the body or the path.
    guard = Guard(settings.api_token, settings.allowed_hosts)
    app.add_middleware(EncodedSlashMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    app.add_middleware(GuardMiddleware, guard=guard)
    # The event POSTs apply the same guard and metrics themselves.
    app.ingest_path = IngestHandler(app.state, guard)
    _document_ingest(app)
    return app


def _document_ingest(app: FastAPI) -> None:
    """Add the event POSTs, which FastAPI never routes, to its OpenAPI document."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = FastAPI.openapi(app)  # cached in app.openapi_schema: the additions are made once
        for path, operation in ingest.OPERATIONS.items():
            schema["paths"].setdefault(path, {})["post"] = operation
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def app_from_settings() -> FastAPI:
    """The app over the configured store (``LOTLINE_*`` or ``lotline.toml``): what each of
    ``lotline serve --workers N``'s processes runs."""
    return create_app(load_settings())
