"""A helper module beside its pipeline (``helped.py``), installed nowhere: a Spark Connect server's
Python workers can import it only once lotline has shipped it (``addArtifacts``)."""

from __future__ import annotations

from pathstyle import PREFIX


def page_name(url: str) -> str:
    return PREFIX + url.strip("/").upper()
