"""The datasets behind a lot's reads, which of them its job did not declare, and column lineage.

The runner gives a transform its declared inputs as DataFrames over the objects of their
manifests; a file relation in the write's plan (``spark.plans``) that is not made of those objects
was opened by the transform itself — a lookup table, a reference file. It is named as OpenLineage
names files (``file`` + path, ``s3://bucket`` + key), unless it lies in the warehouse folder of one
of the pipeline's own datasets, which it then is.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from lotline.domain.model import DatasetRead, DatasetRef, FieldSpec
from lotline.domain.openlineage import dataset_for_uri
from lotline.services import facets
from lotline.spark.capture import path_key
from lotline.spark.pipeline import Pipeline
from lotline.spark.plans import FileRead, WritePlan
from lotline.storage.objects import Storage


@dataclass(frozen=True)
class NamedRead:
    """One file relation of a write's plan, as a dataset; ``declared``: one of the job's inputs."""

    dataset: DatasetRef
    uri: str
    declared: bool
    read: FileRead


def name_reads(
    reads: Sequence[FileRead], declared: Mapping[str, str], pipeline: Pipeline, storage: Storage
) -> list[NamedRead]:
    """Each read as a dataset; ``declared`` maps the URI of every object given to the transform to
    the input dataset it belongs to."""
    declared_keys = {path_key(uri): dataset for uri, dataset in declared.items()}
    homes = {path_key(storage.dataset_uri(pipeline.namespace, d)): d for d in pipeline.datasets}
    named = []
    for read in reads:
        inputs = {declared_keys.get(path_key(uri)) for uri in read.uris}
        uri = _common_folder(read.uris)
        if len(inputs) == 1 and None not in inputs:
            named.append(NamedRead(DatasetRef(pipeline.namespace, str(inputs.pop())), uri, True, read))
            continue
        ref = _home(path_key(uri), homes, pipeline.namespace) or DatasetRef(*dataset_for_uri(uri))
        named.append(NamedRead(ref, uri, False, read))
    return named


def undeclared(named: Sequence[NamedRead]) -> list[DatasetRead]:
    """The reads the job did not declare, one per dataset, with the columns read."""
    found: dict[DatasetRef, DatasetRead] = {}
    for read in named:
        if not read.declared:
            fields = tuple(FieldSpec(name, type_) for name, type_ in read.read.fields)
            found.setdefault(read.dataset, DatasetRead(read.dataset, read.uri, fields))
    return list(found.values())


def column_lineage_facet(plan: WritePlan, named: Sequence[NamedRead]) -> dict[str, Any]:
    """OpenLineage's ``columnLineage`` dataset facet of the written dataset. Every lot of a job
    usually has the same, so it is built once per distinct column lineage (shared: not to be changed)."""
    columns = tuple(
        (
            column,
            tuple(
                (named[s.read].dataset.namespace, named[s.read].dataset.name, s.field, s.transformation.value)
                for s in sources
            ),
        )
        for column, sources in plan.columns.items()
    )
    return _column_lineage(columns)


@functools.lru_cache(maxsize=256)
def _column_lineage(columns: tuple[tuple[str, tuple[tuple[str, str, str, str], ...]], ...]) -> dict[str, Any]:
    return facets.column_lineage(dict(columns))


def _home(key: str, homes: dict[str, str], namespace: str) -> DatasetRef | None:
    for folder, dataset in homes.items():
        if key == folder or key.startswith(folder + "/"):
            return DatasetRef(namespace, dataset)
    return None


def _common_folder(uris: Sequence[str]) -> str:
    """The one root path read, or the folder several root paths share."""
    if len(uris) == 1:
        return uris[0]
    parsed = [urlparse(uri) for uri in uris]
    folder = posixpath.commonpath([p.path for p in parsed]) or "/"
    return parsed[0]._replace(path=folder).geturl()
