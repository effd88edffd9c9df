"""Splitting a lot's first input into the parts of child work (``Pipeline.job(partition_by=…)``)."""

from __future__ import annotations

from collections.abc import Sequence

from lotline.domain.errors import InvalidInput
from lotline.domain.manifests import ManifestObject
from lotline.domain.storage_names import storage_segments

#: Parts of a lot whose first input is split into groups of objects: ``part=00000``, ``part=00001``…
GROUP_KEY = "part"


def split(
    job: str, partition_by: tuple[str, ...] | int, objects: Sequence[ManifestObject]
) -> dict[str, tuple[dict[str, str], list[ManifestObject]]]:
    """Part name (``day=2023-01-02``, or ``part=00003``) -> (its partition values, its objects), in
    name order. Objects are grouped by their partition values, or in uri order ``partition_by`` at a
    time; an object without one of the named partition values is an error naming it."""
    parts: dict[str, tuple[dict[str, str], list[ManifestObject]]] = {}
    if isinstance(partition_by, int):
        ordered = sorted(objects, key=lambda o: o.uri)
        for index in range(0, len(ordered), partition_by):
            values = {GROUP_KEY: f"{index // partition_by:05d}"}
            parts[f"{GROUP_KEY}={values[GROUP_KEY]}"] = (values, ordered[index : index + partition_by])
        return parts
    for found in objects:
        missing = [key for key in partition_by if key not in found.partition_values]
        if missing:
            raise InvalidInput(
                f"job {job}: object {found.uri} has no partition value {missing[0]!r} "
                f"(it is partitioned by {', '.join(partition_by)})."
            )
        values = {key: found.partition_values[key] for key in partition_by}
        name = "/".join(f"{key}={value}" for key, value in values.items())
        storage_segments("Part", name)  # a value that would escape its folder is refused here
        parts.setdefault(name, (values, []))[1].append(found)
    return dict(sorted(parts.items()))
