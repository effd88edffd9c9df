"""``lotline files DATASET``: the objects of a dataset's READY lots, for any other tool to read.

A dataset's folder also holds superseded and failed attempts; these are exactly the objects the
lots' current manifests list (docs/lots.md "Reading a dataset from outside lotline")."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from lotline.cli.context import Namespace, namespace_in, open_existing
from lotline.domain.reading import Published
from lotline.storage.objects import Storage


def files(
    dataset: Annotated[str, typer.Argument(help="The dataset whose current objects to list.")],
    start: Annotated[
        str | None,
        typer.Option("--from", help="Lots whose window ends after this RFC 3339 instant or date."),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option("--to", help="Lots whose window starts before this instant or date (exclusive)."),
    ] = None,
    namespace: Namespace = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON: each lot with its manifest's objects.")
    ] = False,
) -> None:
    """The objects of the dataset's READY lots (of a range): one path per line, or JSON."""
    with open_existing() as lineage:
        namespace = namespace_in(lineage, namespace)
        found = lineage.reading.published(namespace, dataset, start, end)
        storage = lineage.storage
    if as_json:
        print(json.dumps(files_json(found, storage), indent=2))
        return
    for _, listed in found.objects():
        print(storage.local_path(listed.uri))


def files_json(found: Published, storage: Storage) -> dict[str, Any]:
    """``paths``: every object to read, in lot order (what DuckDB's ``read_parquet`` takes);
    ``lots``: every READY lot of the range, empty ones included, with its manifest."""
    return {
        "namespace": found.namespace,
        "dataset": found.dataset,
        "from": None if found.range.start is None else found.range.start.isoformat(),
        "to": None if found.range.end is None else found.range.end.isoformat(),
        "rowCount": found.rows,
        "paths": [storage.local_path(o.uri) for _, o in found.objects()],
        "lots": [
            {
                "lot": m.lot,
                "state": m.state.value,
                "version": m.version_number,
                "manifestId": str(m.id),
                "attempt": m.attempt,
                "rowCount": m.row_count,
                "objects": [{**o.to_json(), "path": storage.local_path(o.uri)} for o in m.objects],
            }
            for m in found.manifests
        ],
    }
