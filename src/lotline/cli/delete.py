"""``lotline delete``: hide a namespace or a dataset (the REST ``DELETE``'s soft delete: history stays,
a later write brings it back) — what undoes one created by mistake."""

from __future__ import annotations

from typing import Annotated

import typer

from lotline.cli.context import open_existing


def delete(
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="The namespace (always named).")],
    dataset: Annotated[
        str | None, typer.Option("--dataset", "-d", help="Only this dataset of the namespace.")
    ] = None,
) -> None:
    """Delete a namespace (with its datasets and jobs) or one dataset of it."""
    lineage = open_existing()
    try:
        if dataset is None:
            lineage.catalog.delete_namespace(namespace)
            print(f"namespace {namespace} deleted")
        else:
            lineage.catalog.delete_dataset(namespace, dataset)
            print(f"dataset {namespace}:{dataset} deleted")
    finally:
        lineage.close()
