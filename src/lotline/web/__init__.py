"""The web UI (docs/ui.md): server-rendered pages over the same services as the REST API.

Pages are Jinja2 templates; htmx swaps in fragments (run history pages, a lot's panel) and the
lineage graphs are drawn by Cytoscape.js from JSON the pages fetch. Actions (invalidate, hold,
release, backfill) call the REST API from the browser with the token the user typed in, so the
UI adds no write path of its own.
"""
