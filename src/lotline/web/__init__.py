"""The web UI (docs/ui.md) that ``lotline serve`` answers at ``/``: server-rendered pages over the
same services as the REST API.

Pages are Jinja2 templates; htmx swaps in fragments (run history pages, a lot's panel) and the
lineage graphs are drawn by Cytoscape.js from JSON the pages fetch. Actions (invalidate, hold,
release, backfill) call the REST API from the browser with the token the user typed in, so the
UI adds no write path of its own.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.responses import Response

from lotline.web.render import STATIC, error_page


def install(app: FastAPI, *, token_required: bool) -> None:
    """Add the pages and their static files to ``app``. The page routes name their path segments
    with the ``seg`` convertor (``api/paths.py``), registered before this is called, as is the
    API's error handler, which the pages' 404 page falls back on."""
    from lotline.web import graphs, lots, pages

    app.state.api_token_required = token_required
    for module in (pages, lots, graphs):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    previous = app.exception_handlers.get(HTTPException, http_exception_handler)

    async def not_found(request: Request, error: Exception) -> Response:
        """An unknown page is the HTML 404 page; the API's unknown paths keep their JSON answer."""
        page_asked = not request.url.path.startswith("/api/")
        if isinstance(error, HTTPException) and error.status_code == 404 and page_asked:
            return error_page(request, 404, f"There is no page at {request.url.path[:200]}.")
        answer = previous(request, error)
        return answer if isinstance(answer, Response) else await answer

    app.add_exception_handler(HTTPException, not_found)
