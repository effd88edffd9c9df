"""``lotline serve``: the REST API, the OpenLineage endpoint and the web UI."""

from __future__ import annotations

import os
import sys

import typer

from lotline.services.config import LOOPBACK_HOSTS, load_settings

#: Addresses that listen on every interface: clients reach them by names the server cannot guess.
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", "[::]"})


def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(5000, help="Port to listen on."),
    workers: int = typer.Option(
        1, min=1, help="Server processes (each also runs a projector; one projects at a time)."
    ),
    access_log: bool = typer.Option(
        False,
        help="Log every request (uvicorn's access log). Off by default: event producers send "
        "thousands of requests a second, and /metrics counts them by route and status.",
    ),
) -> None:
    """Serve the Marquez-compatible REST API and the OpenLineage endpoint over LOTLINE_DB_URL."""
    import uvicorn

    from lotline.api.app import create_app
    from lotline.api.protocol import LotlineHttpProtocol

    settings = load_settings().serving_on(host)
    if host in WILDCARD_ADDRESSES and len(settings.allowed_hosts) == len(LOOPBACK_HOSTS) + 1:
        names = ", ".join(settings.allowed_hosts)
        print(
            f"lotline: note: listening on {host}, but answering only requests for {names} (Host header);"
            " set LOTLINE_ALLOWED_HOSTS to the names clients use",
            file=sys.stderr,
        )
    # The worker processes read their settings again: they get the same allow-list this way.
    os.environ["LOTLINE_ALLOWED_HOSTS"] = ",".join(settings.allowed_hosts)
    # lotline's HTTP protocol: JSON answers to malformed requests, the header limit, the read
    # timeout (LOTLINE_READ_TIMEOUT, read by each worker process from the same settings).
    protocol = "lotline.api.protocol:LotlineHttpProtocol"
    if workers == 1:
        uvicorn.run(
            create_app(settings),
            host=host,
            port=port,
            http=LotlineHttpProtocol,
            log_level="info",
            access_log=access_log,
        )
    else:
        # Each worker process builds its own app (and store) from the same settings.
        uvicorn.run(
            "lotline.api.app:app_from_settings",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            http=protocol,
            log_level="info",
            access_log=access_log,
        )
