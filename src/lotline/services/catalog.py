"""Use cases for namespaces, sources, datasets and jobs: the metadata side of lineage."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.errors import Conflict, InvalidInput, NotFound
from lotline.domain.model import (
    Dataset,
    DatasetRead,
    DatasetRef,
    FieldSpec,
    Job,
    JobVersion,
    Namespace,
    Page,
    RunIoRole,
    Source,
)
from lotline.domain.names import close_names, validate_name
from lotline.domain.versions import job_version_id
from lotline.services import _common
from lotline.services.recording import check_unchanged_after_end, record_run_io
from lotline.store.engine import Store
from lotline.store.queries import catalog, datasets, jobs, runs
from lotline.store.queries import tags as tag_rows

DATASET_TYPES = ("DB_TABLE", "STREAM")
JOB_TYPES = ("BATCH", "STREAM", "SERVICE")
#: How many namespaces an error about choosing one lists.
NAMESPACE_CHOICES = 20
#: The most names a refusal of an unknown one compares it with.
MAX_SUGGESTED = 1000


class CatalogService:
    def __init__(self, store: Store, clock: Clock = SYSTEM_CLOCK) -> None:
        self._store = store
        self._clock = clock

    # -- namespaces -------------------------------------------------------------------------
    def upsert_namespace(
        self, name: str, owner_name: str | None = None, description: str | None = None
    ) -> Namespace:
        validate_name("Namespace", name)
        with self._store.write() as connection:
            return catalog.upsert_namespace(connection, name, owner_name, description, self._clock.now())

    def get_namespace(self, name: str) -> Namespace:
        with self._store.read() as connection:
            found = catalog.get_namespace(connection, name)
        if found is None:
            raise NotFound("Namespace", name)
        return found

    def delete_namespace(self, name: str) -> Namespace:
        """Soft delete (Marquez): the namespace is hidden (``isHidden``) with its datasets and jobs;
        a later write into it brings the namespace back, not what it held. Returns it as it was."""
        with self._store.write() as connection:
            found = catalog.get_namespace(connection, validate_name("Namespace", name))
            if found is None:
                raise NotFound("Namespace", name)
            catalog.hide_namespace(connection, _common.require_namespace(connection, name), self._clock.now())
        return found

    def list_namespaces(self, limit: int = 100, offset: int = 0) -> Page[Namespace]:
        _common.check_page(limit, offset)
        with self._store.read() as connection:
            return catalog.list_namespaces(connection, limit, offset)

    def require_known(self, namespace: str, dataset: str, create: str) -> None:
        """Refuse a namespace or dataset that does not exist, naming the close ones and ``create``,
        the way to make it: a typo must not create a second namespace (issue 39.8)."""
        with self._store.read() as connection:
            if catalog.get_namespace(connection, validate_name("Namespace", namespace)) is None:
                known = [n.name for n in catalog.list_namespaces(connection, MAX_SUGGESTED, 0).items]
                raise InvalidInput(_unknown("namespace", namespace, close_names(namespace, known), create))
            if datasets.get_dataset(connection, namespace, dataset) is None:
                listed = datasets.list_datasets(connection, namespace, MAX_SUGGESTED, 0).items
                close = close_names(dataset, [d.name for d in listed])
                raise InvalidInput(_unknown(f"dataset of {namespace}", dataset, close, create))

    def resolve_namespace(self, given: str | None, configured: str | None) -> str:
        """The namespace a command works in (SPEC §8): the one it was given, else the configured
        one (``namespace`` in lotline.toml), else the only namespace in the database, else the only
        one with lots (others may hold only lineage that other tools sent over OpenLineage); with
        none or several, an error listing those that exist."""
        chosen = given if given is not None else configured
        if chosen is not None:
            return validate_name("Namespace", chosen)
        with self._store.read() as connection:
            found = catalog.list_namespaces(connection, NAMESPACE_CHOICES, 0)
            with_lots = catalog.namespaces_with_lots(connection, 2) if found.total_count > 1 else []
        if found.total_count == 1:
            return found.items[0].name
        if len(with_lots) == 1:  # the others only hold lineage other tools sent
            return with_lots[0]
        how = "name one with -n/--namespace or set namespace in lotline.toml"
        if found.total_count == 0:
            raise InvalidInput(f"no namespace exists yet: {how}.")
        names = ", ".join(n.name for n in found.items) + (
            ", …" if found.total_count > len(found.items) else ""
        )
        raise InvalidInput(f"{found.total_count} namespaces exist ({names}): {how}.")

    # -- sources ----------------------------------------------------------------------------
    def upsert_source(
        self, name: str, type: str, connection_url: str | None = None, description: str | None = None
    ) -> Source:
        validate_name("Source", name)
        if not type or not type.strip():
            raise InvalidInput("Source type must not be empty.")
        with self._store.write() as connection:
            source_id = catalog.write_source(
                connection, name, type, connection_url, description, self._clock.now()
            )
            return catalog.source_by_id(connection, source_id)

    def get_source(self, name: str) -> Source:
        with self._store.read() as connection:
            found = catalog.get_source(connection, name)
        if found is None:
            raise NotFound("Source", name)
        return found

    def list_sources(self, limit: int = 100, offset: int = 0) -> Page[Source]:
        _common.check_page(limit, offset)
        with self._store.read() as connection:
            return catalog.list_sources(connection, limit, offset)

    # -- datasets ---------------------------------------------------------------------------
    def upsert_dataset(
        self,
        namespace: str,
        name: str,
        *,
        type: str = "DB_TABLE",
        physical_name: str | None = None,
        source: str | None = None,
        fields: Sequence[FieldSpec] | None = None,
        description: str | None = None,
        facets: dict[str, Any] | None = None,
        run_id: uuid.UUID | None = None,
        schema_location: str | None = None,
        tags: Sequence[str] = (),
        field_tags: Mapping[str, Sequence[str]] | None = None,
    ) -> Dataset:
        """Create or update a dataset's metadata; with ``run_id``, also record it as that run's output.

        The write gets its version when the run ends, resolved by the run's outcome (SPEC §3).
        ``schema_location`` (where a STREAM's schema is published) is kept for STREAM datasets only.
        ``tags`` and ``field_tags`` (field name -> tags) are added in the same transaction: a tag
        on a field the dataset does not have is NotFound and nothing is written.
        """
        field_tags = field_tags or {}
        for tag in [*tags, *(t for names in field_tags.values() for t in names)]:
            validate_name("Tag", tag)
        validate_name("Dataset", name)
        if type not in DATASET_TYPES:
            raise InvalidInput(f"Dataset type must be one of {', '.join(DATASET_TYPES)}, got {type!r}.")
        if schema_location is not None and type != "STREAM":
            raise InvalidInput("schemaLocation is for STREAM datasets only.")
        names = [f.name for f in fields or ()]
        if len(set(names)) != len(names):
            raise InvalidInput("Dataset fields must have distinct names.")
        with self._store.write() as connection:
            namespace_id = _common.require_namespace(connection, namespace)
            source_id = None
            if source is not None:
                source_id = catalog.source_id(connection, source)
                if source_id is None:
                    raise NotFound("Source", source)
            run = _common.require_run(connection, run_id) if run_id is not None else None
            now = self._clock.now()
            dataset_id = datasets.upsert_dataset(
                connection,
                namespace_id,
                name,
                type_=type,
                physical_name=physical_name,
                source_id=source_id,
                description=description,
                facets=facets,
                now=now,
                schema_location=schema_location,
            )
            if fields is not None:
                datasets.replace_fields(connection, dataset_id, fields)
            if run is not None:
                record_run_io(connection, run, RunIoRole.OUTPUT, [(dataset_id, run.lot)], now)
            self._tag(connection, dataset_id, f"{namespace}:{name}", tags, field_tags, now)
            found = datasets.get_dataset(connection, namespace, name)
        if found is None:  # written in this transaction, so only a bug could hide it
            raise NotFound("Dataset", f"{namespace}:{name}")
        return found

    @staticmethod
    def _tag(
        connection: Connection,
        dataset_id: uuid.UUID,
        label: str,
        names: Sequence[str],
        field_tags: Mapping[str, Sequence[str]],
        now: datetime,
    ) -> None:
        for tag in names:
            tag_rows.tag_dataset(connection, dataset_id, tag_rows.upsert_tag(connection, tag, None, now), now)
        known = {f.name for f in datasets.fields_of(connection, dataset_id)} if field_tags else set()
        for field_name, field_tag_names in field_tags.items():
            if field_name not in known:
                raise NotFound("Field", f"{label}:{field_name}")
            for tag in field_tag_names:
                tag_id = tag_rows.upsert_tag(connection, tag, None, now)
                tag_rows.tag_field(connection, dataset_id, field_name, tag_id, now)

    def get_dataset(self, namespace: str, name: str) -> Dataset:
        with self._store.read() as connection:
            found = datasets.get_dataset(connection, namespace, name)
        if found is None:
            raise NotFound("Dataset", f"{namespace}:{name}")
        return found

    def delete_dataset(self, namespace: str, name: str) -> Dataset:
        """Soft delete: hidden from reads (and the lineage graph) until written again; history stays."""
        with self._store.write() as connection:
            found = datasets.get_dataset(connection, namespace, name)
            if found is None:
                raise NotFound("Dataset", f"{namespace}:{name}")
            datasets.soft_delete(
                connection, _common.require_dataset(connection, namespace, name), self._clock.now()
            )
        return found

    def list_datasets(self, namespace: str, limit: int = 100, offset: int = 0) -> Page[Dataset]:
        _common.check_page(limit, offset)
        with self._store.read() as connection:
            _common.require_namespace(connection, namespace)
            return datasets.list_datasets(connection, namespace, limit, offset)

    # -- jobs -------------------------------------------------------------------------------
    def upsert_job(
        self,
        namespace: str,
        name: str,
        *,
        type: str = "BATCH",
        inputs: Sequence[DatasetRef] = (),
        outputs: Sequence[DatasetRef] = (),
        location: str | None = None,
        description: str | None = None,
        run_id: uuid.UUID | None = None,
    ) -> Job:
        """Create or update a job. Its inputs, outputs and location fix its current version.

        With ``run_id`` (dynamic capture, seed 003) the run is moved to that version and the
        inputs and outputs are recorded as the run's own: inputs pinned to their current version
        now if the run is running, outputs versioned when the run ends. For a run that has ended,
        only a declaration it already had is accepted (the run is left as it is); a new one is a
        Conflict.
        """
        validate_name("Job", name)
        if type not in JOB_TYPES:
            raise InvalidInput(f"Job type must be one of {', '.join(JOB_TYPES)}, got {type!r}.")
        with self._store.write() as connection:
            namespace_id = _common.require_namespace(connection, namespace)
            input_ids = _common.require_datasets(connection, inputs)
            output_ids = _common.require_datasets(connection, outputs)
            run = _common.require_run(connection, run_id) if run_id is not None else None
            now = self._clock.now()
            job_id = jobs.upsert_job(
                connection, namespace_id, name, type_=type, description=description, now=now
            ).id
            if run is not None and run.job_id != job_id:
                raise Conflict(f"Run {run_id} belongs to another job, not {namespace}:{name}.")
            version = job_version_id(
                namespace,
                name,
                location,
                [f"{r.namespace}:{r.name}" for r in inputs],
                [f"{r.namespace}:{r.name}" for r in outputs],
            )
            jobs.set_current_version(
                connection,
                job_id,
                version,
                location=location,
                inputs=[d for d, _ in input_ids],
                outputs=[d for d, _ in output_ids],
                now=now,
            )
            if run is not None and run.state.is_terminal:
                # A repeat of what the run already had changes nothing (Marquez answers it 200).
                declared = [d for d, _ in input_ids], [d for d, _ in output_ids]
                check_unchanged_after_end(connection, run, version, *declared)
            elif run is not None:
                for role, ids, refs in (
                    (RunIoRole.INPUT, input_ids, inputs),
                    (RunIoRole.OUTPUT, output_ids, outputs),
                ):
                    record_run_io(connection, run, role, _default_lot(ids, refs, run.lot), now)
                runs.set_job_version(connection, run.id, version, now)
            found = jobs.get_job(connection, namespace, name)
        if found is None:  # written in this transaction, so only a bug could hide it
            raise NotFound("Job", f"{namespace}:{name}")
        return found

    def record_reads(self, run_id: uuid.UUID, reads: Sequence[DatasetRead]) -> None:
        """Datasets a running run read without its job declaring them (seen in Spark's plans).

        Each becomes an input of the run (pinned to its current version, if it has one) and an
        undeclared input of the run's job version, so the lineage graph shows it; a dataset or
        namespace seen for the first time is created with the schema that was read.
        """
        for read in reads:
            validate_name("Namespace", read.dataset.namespace)
            validate_name("Dataset", read.dataset.name)
        with self._store.write() as connection:
            run = _common.require_run(connection, run_id)
            now = self._clock.now()
            dataset_ids = []
            for read in reads:
                ref = read.dataset
                namespace_id = catalog.ensure_namespace(connection, ref.namespace, now)
                dataset_id = datasets.dataset_id(connection, ref.namespace, ref.name)
                if dataset_id is None:
                    dataset_id = datasets.upsert_dataset(
                        connection,
                        namespace_id,
                        ref.name,
                        type_="DB_TABLE",
                        physical_name=read.physical_name,
                        source_id=None,
                        description=None,
                        facets=None,
                        now=now,
                    )
                    datasets.replace_fields(connection, dataset_id, read.fields)
                dataset_ids.append(dataset_id)
            record_run_io(connection, run, RunIoRole.INPUT, [(d, "") for d in dataset_ids], now)
            if run.job_version_id is not None:
                jobs.add_reads(connection, run.job_version_id, dataset_ids, run.id, now)

    def delete_job(self, namespace: str, name: str) -> Job:
        """Soft delete (Marquez): hidden from reads and the lineage graph until written again (a
        ``PUT`` or an event); its runs and versions stay. Returns it as it was."""
        with self._store.write() as connection:
            _common.require_namespace(connection, namespace)
            found = jobs.get_job(connection, namespace, validate_name("Job", name))
            if found is None:
                raise NotFound("Job", f"{namespace}:{name}")
            jobs.hide_job(
                connection, _common.require_live_job(connection, namespace, name), self._clock.now()
            )
        return found

    def get_job(self, namespace: str, name: str) -> Job:
        with self._store.read() as connection:
            found = jobs.get_job(connection, namespace, name)
        if found is None:
            raise NotFound("Job", f"{namespace}:{name}")
        return found

    def list_jobs(self, namespace: str | None = None, limit: int = 100, offset: int = 0) -> Page[Job]:
        _common.check_page(limit, offset)
        with self._store.read() as connection:
            if namespace is not None:
                _common.require_namespace(connection, namespace)
            return jobs.list_jobs(connection, namespace, limit, offset)

    def list_job_versions(
        self, namespace: str, name: str, limit: int = 100, offset: int = 0
    ) -> Page[JobVersion]:
        _common.check_page(limit, offset)
        with self._store.read() as connection:
            job_id = _common.require_job(connection, namespace, name).id
            return jobs.list_job_versions(connection, job_id, namespace, name, limit, offset)

    def get_job_version(self, namespace: str, name: str, version_id: uuid.UUID) -> JobVersion:
        with self._store.read() as connection:
            row = jobs.job_row(connection, namespace, name)
            found = jobs.get_job_version(connection, row.id, namespace, name, version_id) if row else None
        if found is None:
            raise NotFound("Job version", f"{namespace}:{name}#{version_id}")
        return found


def _default_lot(
    resolved: list[tuple[uuid.UUID, str]], refs: Sequence[DatasetRef], run_lot: str
) -> list[tuple[uuid.UUID, str]]:
    """A job's inputs and outputs without a lot of their own take the run's lot."""
    return [
        (d, lot if ref.lot is not None else run_lot) for (d, lot), ref in zip(resolved, refs, strict=True)
    ]


def _unknown(kind: str, name: str, close: list[str], create: str) -> str:
    guess = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return f"no {kind} {name!r}: {guess}{create} makes it."
