"""How deep accepted JSON may nest (docs/api.md "Limits"), and showing what was stored deeper.

Events are journaled as they come, and facets are free-form: a client could post a facet nested
hundreds of levels deep that every reader of it then fails to encode. So an event nested deeper
than ``MAX_JSON_DEPTH`` is refused at the door (400), and read paths show anything stored deeper
(by a lotline that did not check yet) cut at that depth instead of failing.
"""

from __future__ import annotations

from typing import Any

from lotline.domain.errors import InvalidInput

#: Containers (objects and arrays) inside one another; real facets use a handful.
MAX_JSON_DEPTH = 64
CUT = f"(nested deeper than {MAX_JSON_DEPTH} levels: not shown)"


def check_depth(value: Any, where: str, limit: int = MAX_JSON_DEPTH) -> None:
    """InvalidInput if ``value`` nests containers deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise InvalidInput(f"{where} nests JSON deeper than {limit} levels.")
        stack.extend((child, depth + 1) for child in children)


def bounded(value: Any, limit: int = MAX_JSON_DEPTH) -> Any:
    """``value`` with every container below ``limit`` levels replaced by a note saying so."""
    if not isinstance(value, dict | list):
        return value
    if limit <= 0:
        return CUT
    if isinstance(value, dict):
        return {key: bounded(child, limit - 1) for key, child in value.items()}
    return [bounded(child, limit - 1) for child in value]
