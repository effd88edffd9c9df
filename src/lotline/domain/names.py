"""Validation of the names users give to namespaces, sources, datasets and jobs (SPEC §9)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from lotline.domain.errors import InvalidName

MAX_NAME_LENGTH = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SEPARATORS = re.compile(r"[/\\]")


def validate_name(kind: str, name: str) -> str:
    """Accept lineage names as Marquez and OpenLineage spell them (``/``, ``:`` allowed).

    Rejected: empty or over-long names, control characters, and ``..`` path segments, which
    would let a name escape a storage root once it is used in a path.
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidName(f"{kind} name must not be empty.")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"{kind} name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}.")
    if _CONTROL.search(name):
        raise InvalidName(f"{kind} name {name!r} contains a control character.")
    if ".." in name and ".." in _SEPARATORS.split(name):
        raise InvalidName(f"{kind} name {name!r} contains a '..' path segment.")
    return name


def close_names(name: str, known: Iterable[str]) -> list[str]:
    """The known names a mistyped one is probably (at most three, closest first): what a refusal of
    an unknown name offers instead."""
    return difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
