"""What every command shares: the database it opens, the namespace it works in, ``lotline config``."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from lotline.domain.secrets import masked_url
from lotline.services import Lineage, open_configured
from lotline.services.config import DEFAULT_SOURCE, DEFAULTS, load_settings, read_configuration
from lotline.store.engine import shown_url

Namespace = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        help="Namespace of the jobs and datasets (default: `namespace` in lotline.toml, else the "
        "only namespace in the database).",
    ),
]
#: Values ``lotline config`` never prints.
SECRETS = ("LOTLINE_API_TOKEN", "LOTLINE_OPENLINEAGE_API_KEY")
#: URLs ``lotline config`` prints with their secrets masked (a comma-separated list for webhooks).
ENDPOINTS = ("LOTLINE_OPENLINEAGE_URL", "LOTLINE_WEBHOOK_URLS", "LOTLINE_S3_ENDPOINT_URL")
__all__ = ["Namespace", "config", "load_settings", "namespace_in", "open_existing"]


def open_existing() -> Lineage:
    """The configured database for a command that reads (or changes what exists): never created."""
    return open_configured(load_settings(), create=False)


def namespace_in(lineage: Lineage, given: str | None) -> str:
    """``-n`` if given, else the configured namespace, else the database's only one (SPEC §8)."""
    return lineage.catalog.resolve_namespace(given, load_settings().namespace)


def config(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The configuration in use: each value and where it came from (env, lotline.toml, default)."""
    load_settings()  # a bad value is the one-line error it is for every command
    rows = []
    for key, setting in read_configuration().items():
        value = setting.value if setting.source != DEFAULT_SOURCE else DEFAULTS.get(key)
        if value is not None and key in SECRETS:
            value = "****"
        elif value is not None and key == "LOTLINE_DB_URL":
            value = shown_url(value)
        elif value is not None and key in ENDPOINTS:
            value = ",".join(masked_url(url.strip()) for url in value.split(","))
        rows.append({"key": key, "value": value, "source": setting.source})
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    width = max(len(r["key"] or "") for r in rows)
    for row in rows:
        shown = "(not set)" if row["value"] is None else row["value"]
        print(f"{row['key']:<{width}}  {shown}  [{row['source']}]")


def lotline_command() -> str:
    """How to call this lotline from any folder: ``lotline`` if that is what the PATH finds, else
    the absolute path of the one beside this Python (the venv's), else ``python -m lotline``."""
    beside = Path(sys.executable).parent / "lotline"
    on_path = shutil.which("lotline")
    if on_path is not None and beside.exists() and Path(on_path).resolve() == beside.resolve():
        return "lotline"
    if beside.exists():
        return shlex.quote(str(beside))
    return f"{shlex.quote(sys.executable)} -m lotline"
