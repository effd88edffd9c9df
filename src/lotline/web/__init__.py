"""The web UI (docs/ui.md) that ``lotline serve`` answers at ``/``: server-rendered pages over the
same services as the REST API.

Pages are Jinja2 templates; htmx swaps in fragments (run history pages, a lot's panel) and the
lineage graphs are drawn by Cytoscape.js from JSON the pages fetch. Actions (invalidate, hold,
release, backfill) call the REST API from the browser with the token the user typed in, so the
UI adds no write path of its own.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from lotline.web.render import STATIC


def install(app: FastAPI, *, token_required: bool) -> None:
    """Add the pages and their static files to ``app``. The page routes name their path segments
    with the ``seg`` convertor (``api/paths.py``), registered before this is called."""
    from lotline.web import graphs, lots, pages

    app.state.api_token_required = token_required
    for module in (pages, lots, graphs):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
