"""Which names may become folders under a storage root, and which datasets' folders would overlap.

A dataset's objects live under ``<root>/<namespace>/<dataset>/lot=<L>/attempt=<N>/``, its manifest
copies under ``<root>/<namespace>/_manifests/datasets/name=<dataset>/…`` (docs/lots.md). Readers
take what a manifest lists, but an attempt's listing and cleanup's listing walk folders: a dataset
whose folder lay inside another's would show up in that one's attempts, and one with a
``_manifests`` segment would have its data taken for manifest copies by cleanup. So a dataset's
folder never lies inside another's, and the segments the layout uses are not names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lotline.domain.errors import Conflict, InvalidName

MANIFESTS_FOLDER = "_manifests"
#: Segments the layout writes below a dataset's folder: a name may not contain one.
RESERVED_PREFIXES = ("lot=", "attempt=")
#: The longest file or folder name local file systems (and S3 tools that mirror keys) accept.
MAX_SEGMENT_BYTES = 255
#: A dataset's first segment is also its manifest copies' ``name=<segment>`` folder.
_COPY_FOLDER_PREFIX = "name="
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def storage_segments(kind: str, name: str) -> list[str]:
    """The path segments a name becomes under the root, or InvalidName if it could escape it.

    Refused: absolute names, empty, ``.`` or ``..`` segments, backslashes, control characters and
    segments longer than a file name may be.
    """
    segments = _path_segments(kind, name)
    for segment in segments:
        _check_length(kind, name, segment, len(segment.encode()))
    return segments


def can_be_stored(namespace: str, dataset: str) -> bool:
    """Whether the names are paths at all. Lineage names such as ``postgres://db:5432`` are not:
    such a dataset may take part in lot coordination, but nothing ever stores it (every path
    built from it is refused), so its folder overlaps nothing."""
    try:
        _path_segments("Namespace", namespace)
        _path_segments("Dataset", dataset)
    except InvalidName:
        return False
    return True


def _path_segments(kind: str, name: str) -> list[str]:
    if not isinstance(name, str) or not name:
        raise InvalidName(f"{kind} name must not be empty.")
    if _CONTROL.search(name) or "\\" in name:
        raise InvalidName(f"{kind} name {name!r} contains a control character or a backslash.")
    if name.startswith("/"):
        raise InvalidName(f"{kind} name {name!r} is an absolute path; it cannot be stored under the root.")
    segments = name.split("/")
    if any(s in ("", ".", "..") for s in segments):
        raise InvalidName(f"{kind} name {name!r} has an empty, '.' or '..' path segment.")
    return segments


def dataset_segments(namespace: str, dataset: str) -> tuple[list[str], list[str]]:
    """The folders of a dataset under the root (namespace's, then dataset's), or InvalidName if a
    segment is one the layout reserves (``_manifests``, ``lot=…``, ``attempt=…``) or too long."""
    found = []
    for kind, name in (("Namespace", namespace), ("Dataset", dataset)):
        segments = storage_segments(kind, name)
        for segment in segments:
            if segment == MANIFESTS_FOLDER or segment.startswith(RESERVED_PREFIXES):
                raise InvalidName(
                    f"{kind} name {name!r} has the segment {segment!r}, which the storage layout reserves "
                    f"({MANIFESTS_FOLDER}, {', '.join(p + '…' for p in RESERVED_PREFIXES)})."
                )
        found.append(segments)
    first = found[1][0]
    _check_length("Dataset", dataset, first, len((_COPY_FOLDER_PREFIX + first).encode()))
    return found[0], found[1]


def dataset_prefix(namespace: str, dataset: str) -> tuple[str, ...]:
    """A dataset's folder under the root, as segments (checked as ``dataset_segments`` does)."""
    namespace_segments, segments = dataset_segments(namespace, dataset)
    return (*namespace_segments, *segments)


def overlapping(prefix: tuple[str, ...], others: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """The first (namespace, dataset) of ``others`` whose folder holds ``prefix``'s, lies inside it
    or is it; None if every folder is apart. A name ``others`` holds that is no longer valid is not
    a folder anything writes to."""
    for namespace, dataset in others:
        try:
            other = dataset_prefix(namespace, dataset)
        except InvalidName:
            continue
        shorter = min(len(other), len(prefix))
        if other[:shorter] == prefix[:shorter]:
            return namespace, dataset
    return None


def check_apart(namespace: str, dataset: str, others: Iterable[tuple[str, str]]) -> None:
    """A Conflict naming both datasets if ``dataset``'s folder overlaps one of ``others``' (produced
    datasets); InvalidName if its name is one storage refuses."""
    prefix = dataset_prefix(namespace, dataset)
    other = overlapping(prefix, others)
    if other is not None:
        raise Conflict(
            f"Dataset {namespace}:{dataset} cannot be produced: its storage folder {'/'.join(prefix)}/ "
            f"overlaps that of dataset {other[0]}:{other[1]}, which a job produces "
            "(a dataset's folder must not hold another's)."
        )


def _check_length(kind: str, name: str, segment: str, size: int) -> None:
    if size > MAX_SEGMENT_BYTES:
        raise InvalidName(
            f"{kind} name {name[:40]!r}… has a path segment of {size} bytes in storage "
            f"({segment[:20]!r}…); the limit is {MAX_SEGMENT_BYTES}."
        )
