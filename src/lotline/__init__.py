"""lotline: PySpark pipelines lot by lot. ``lotline.read``, ``lotline.read_arrow`` and
``lotline.published`` read a dataset's current lots from outside (``lotline.readers``, loaded on
first use, so that importing any other module of lotline stays cheap)."""

from __future__ import annotations

from typing import Any

_READERS = frozenset({"published", "read", "read_arrow"})


def __getattr__(name: str) -> Any:
    if name in _READERS:
        from lotline import readers

        return getattr(readers, name)
    raise AttributeError(f"module 'lotline' has no attribute {name!r}")
