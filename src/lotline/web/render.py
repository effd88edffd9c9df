"""Templates, their filters, and the one way a page turns a use-case error into an error page."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool

from lotline.domain.errors import DatabaseUnavailable, LotlineError
from lotline.domain.grid import DONE, HEALTH_ORDER
from lotline.domain.json_depth import bounded
from lotline.services import Lineage
from lotline.services.facets import FILES_LAYER

HERE = Path(__file__).parent
STATIC = HERE / "static"
templates = Jinja2Templates(directory=HERE / "templates")
#: The header that says how many journaled events a page or document does not show yet (as the API's).
PENDING_HEADER = "X-Lineage-Pending"


def segment(name: str) -> str:
    """A name as one path segment: ``/`` and ``:`` encoded, as Marquez clients send them."""
    return quote(name, safe="")


#: The one format every page shows an instant in (UTC; ui.js ``shownTime`` writes the same).
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def instant(value: datetime.datetime | str | None) -> datetime.datetime | None:
    """``value`` as an aware instant: an ISO 8601 text (an OpenLineage ``eventTime``) is read, one
    without a zone as UTC; None for None or a text that is no instant."""
    if isinstance(value, str):
        try:
            value = datetime.datetime.fromisoformat(value)
        except ValueError:
            return None
        return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
    return value


def when(value: datetime.datetime | str | None) -> str:
    """An instant as text, in an attribute or a form's field (``at`` in a page's text)."""
    found = instant(value)
    return "" if found is None else found.astimezone(datetime.UTC).strftime(TIME_FORMAT)


def at(value: datetime.datetime | str | None) -> Markup:
    """An instant in a page's text: ``<time>`` in ``TIME_FORMAT``, never cut across lines (ui.css);
    a text that is no instant is shown as it is."""
    found = instant(value)
    if found is None:
        return Markup("") if value is None else escape(str(value))
    exact = found.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    return Markup('<time datetime="{}">{}</time>').format(exact, when(found))


def duration(ms: int | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


def pretty_json(value: object) -> str:
    return json.dumps(bounded(value), indent=2, sort_keys=True, default=str)


def query(base: Mapping[str, object], **changes: object) -> str:
    """``?…`` of ``base`` with ``changes`` applied (None removes a key); lists repeat the key."""
    merged = {**base, **changes}
    pairs: list[tuple[str, str]] = []
    for key, value in merged.items():
        if value is None or value in ("", []):
            continue
        for item in value if isinstance(value, list | tuple) else [value]:
            pairs.append((key, str(item)))
    return "?" + urlencode(pairs) if pairs else ""


def job_url(namespace: str, job: str) -> str:
    return f"/jobs/{segment(namespace)}/{segment(job)}"


def dataset_url(namespace: str, dataset: str) -> str:
    return f"/datasets/{segment(namespace)}/{segment(dataset)}"


def lot_url(namespace: str, dataset: str, lot: str) -> str:
    return f"{dataset_url(namespace, dataset)}/lots/{segment(lot)}"


def dataset_kind(facets: Mapping[str, Any], catalog_type: str) -> str:
    """What a dataset is, in words: ``parquet files`` for a dataset of files (its ``storage`` and
    ``datasetType`` facets, which lotline writes for the datasets it declares), else the
    catalog's type (``db_table``, ``stream``)."""
    storage, kind = facets.get("storage"), facets.get("datasetType")
    storage = storage if isinstance(storage, dict) else {}
    kind = kind if isinstance(kind, dict) else {}
    layer, file_format = str(storage.get("storageLayer") or ""), str(storage.get("fileFormat") or "")
    if layer and layer != FILES_LAYER:  # a table format over files: ``iceberg (parquet)``
        return f"{layer} ({file_format})" if file_format else layer
    if file_format:
        return f"{file_format} files"
    return "files" if str(kind.get("datasetType", "")).upper() == "FILE" else catalog_type.lower()


def node_link(node_id: str) -> str:
    """The lineage page of a ``job:…`` or ``dataset:…`` node id."""
    return "/lineage" + query({"node": node_id})


templates.env.filters.update(seg=segment, when=when, at=at, duration=duration, pretty_json=pretty_json)
templates.env.globals.update(
    query=query,
    job_url=job_url,
    dataset_url=dataset_url,
    lot_url=lot_url,
    node_link=node_link,
    dataset_kind=dataset_kind,
    health_order=HEALTH_ORDER,
    done_states=DONE,
)


def lineage_of(request: Request) -> Lineage:
    found: Lineage = request.app.state.lineage
    return found


async def page(
    request: Request, template: str, build: Callable[[Lineage], Mapping[str, Any]], *, fresh: bool = True
) -> HTMLResponse:
    """Render ``template`` with what ``build`` reads (in the thread pool: the services are sync).
    ``fresh``: first apply the OpenLineage events journaled before the request as an API read does
    (a small backlog; a larger one is announced on the page and in ``X-Lineage-Pending``).
    A use-case error is an error page with its status; an unreachable database a 503 page."""
    lineage = lineage_of(request)

    def read() -> Mapping[str, Any]:
        pending = lineage.projection.catch_up_for_read() if fresh else 0
        # Read first: a lot event committed while the page is built is one the page refreshes for.
        position = None if is_fragment(request) else lineage.lot_events.last_position()
        found = dict(build(lineage))
        if position is not None:  # the layout's namespace switcher, and where live parts follow from
            found["namespaces"] = [n.name for n in lineage.catalog.list_namespaces(limit=1000).items]
            found["events_after"] = position
            if found.get("ns"):  # a hold is no lot event: the live parts compare these (ui.js setUpLive)
                found["holds"] = ",".join(lineage.lots.held_jobs(found["ns"]))
        found["pending_events"] = pending
        found.setdefault("now", lineage.clock.now())  # what freshness ("last lot 3 h ago") counts from
        return found

    try:
        context = await run_in_threadpool(read)
    except LotlineError as error:
        return error_page(request, *failure(error))
    # A page that shows a refused input in place (a grid's form) still answers with its status.
    status = int(context.get("http_status", 200))
    response = templates.TemplateResponse(
        request, template, {**common(request), **context}, status_code=status
    )
    if context["pending_events"]:
        response.headers[PENDING_HEADER] = str(context["pending_events"])
    return response


def failure(error: LotlineError) -> tuple[int, str]:
    """The status and message a use-case error or an unreachable database is shown with."""
    if isinstance(error, DatabaseUnavailable):
        return 503, "The database is unreachable; this page will work again when it is back."
    return error.http_status, error.message


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    return templates.TemplateResponse(
        request, "error.html", {**common(request), "status": status, "message": message}, status_code=status
    )


def is_fragment(request: Request) -> bool:
    """htmx asked for a part of a page (not a boosted link, which wants the whole page)."""
    return request.headers.get("hx-request") == "true" and not request.headers.get("hx-boosted")


def common(request: Request) -> dict[str, Any]:
    """What the layout needs on every page."""
    partial = is_fragment(request)
    return {
        "auth_required": request.app.state.api_token_required,
        "params": {
            key: values if len(values) > 1 else values[0]
            for key in request.query_params
            for values in [request.query_params.getlist(key)]
        },
        "partial": partial,
        # A fragment asked for by htmx is the page's content alone; a link opens it whole.
        "layout": "_fragment.html" if partial else "base.html",
    }
