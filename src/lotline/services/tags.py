"""Use cases for tags on datasets and dataset fields."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import Connection

from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.errors import NotFound
from lotline.domain.model import Page
from lotline.domain.names import validate_name
from lotline.domain.tags import DatasetTags, Tag
from lotline.services import _common
from lotline.store.engine import Store
from lotline.store.queries import datasets, graph, tags


class TagService:
    def __init__(self, store: Store, clock: Clock = SYSTEM_CLOCK) -> None:
        self._store = store
        self._clock = clock

    def upsert_tag(self, name: str, description: str | None = None) -> Tag:
        validate_name("Tag", name)
        with self._store.write() as connection:
            tags.upsert_tag(connection, name, description, self._clock.now())
            found = tags.get_tag(connection, name)
        if found is None:  # written in this transaction, so only a bug could hide it
            raise NotFound("Tag", name)
        return found

    def list_tags(self, limit: int = 100, offset: int = 0) -> Page[Tag]:
        _common.check_page(limit, offset)
        with self._store.read() as connection:
            items, total = tags.list_tags(connection, limit, offset)
        return Page(items, total)

    def tag_dataset(self, namespace: str, dataset: str, tag: str, *, remove: bool = False) -> None:
        """Tag (or untag) a dataset; a tag named for the first time is created."""
        validate_name("Tag", tag)
        with self._store.write() as connection:
            dataset_id = _live_dataset(connection, namespace, dataset)
            if remove:
                tags.untag_dataset(connection, dataset_id, _existing_tag(connection, tag))
                return
            now = self._clock.now()
            tags.tag_dataset(connection, dataset_id, tags.upsert_tag(connection, tag, None, now), now)

    def tag_field(self, namespace: str, dataset: str, field: str, tag: str, *, remove: bool = False) -> None:
        """Tag (or untag) a field of a dataset; a tag named for the first time is created."""
        validate_name("Tag", tag)
        with self._store.write() as connection:
            dataset_id = _live_dataset(connection, namespace, dataset)
            if field not in {f.name for f in datasets.fields_of(connection, dataset_id)}:
                raise NotFound("Field", f"{namespace}:{dataset}:{field}")
            if remove:
                tags.untag_field(connection, dataset_id, field, _existing_tag(connection, tag))
                return
            now = self._clock.now()
            tags.tag_field(connection, dataset_id, field, tags.upsert_tag(connection, tag, None, now), now)

    def tag_job(self, namespace: str, job: str, tag: str, *, remove: bool = False) -> None:
        """Tag (or untag) a job (Marquez ``POST/DELETE …/jobs/{job}/tags/{tag}``)."""
        validate_name("Tag", tag)
        with self._store.write() as connection:
            _common.require_namespace(connection, namespace)
            job_id = _common.require_live_job(connection, namespace, validate_name("Job", job))
            if remove:
                tags.untag_job(connection, job_id, _existing_tag(connection, tag))
                return
            now = self._clock.now()
            tags.tag_job(connection, job_id, tags.upsert_tag(connection, tag, None, now), now)

    def dataset_tags(self, refs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], DatasetTags]:
        """Tags of many datasets at once, keyed by (namespace, name); unknown ones get none."""
        with self._store.read() as connection:
            ids = datasets.dataset_ids(connection, list(dict.fromkeys(refs)))
            known = tags.tags_of_datasets(connection, list(ids.values()))
        return {ref: known.get(ids[ref], DatasetTags()) if ref in ids else DatasetTags() for ref in refs}


def _existing_tag(connection: Connection, tag: str) -> uuid.UUID:
    found = tags.tag_id(connection, tag)
    if found is None:
        raise NotFound("Tag", tag)
    return found


def _live_dataset(connection: Connection, namespace: str, dataset: str) -> uuid.UUID:
    _common.require_namespace(connection, namespace)
    found = graph.live_dataset_id(connection, namespace, validate_name("Dataset", dataset))
    if found is None:
        raise NotFound("Dataset", f"{namespace}:{dataset}")
    return found
