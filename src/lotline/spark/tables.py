"""Catalog tables over a dataset's READY lots (docs/lots.md "A Spark catalog table"): an external
table partitioned by ``lot``, one partition per READY lot with data, each pointing at the attempt
folder its current manifest lists, so that ``spark.table(...)`` and Spark SQL read exactly the
published lots and never a superseded attempt beside them.

The catalog (Hive's metastore) is not lotline's database, so a partition cannot change in the
transaction that publishes its lot. The runner moves it right after that commit, before it claims
its next lot (``CatalogTables.published``), and reconciles every table with the manifests when it
starts (``sync_table``): that repairs what a crash between the two left, and withdraws the lots
reopened (invalidation, late data) while no runner ran.
"""

from __future__ import annotations

import logging
import posixpath
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

from lotline.domain.errors import InvalidInput, LotlineError
from lotline.domain.manifests import Manifest, ManifestObject
from lotline.domain.reading import check_table_name
from lotline.services import Lineage
from lotline.spark.frames import TEXT_SCHEMA
from lotline.spark.pipeline import Pipeline, PipelineError
from lotline.spark.reading import object_key

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: The partition column every table has.
LOT = "lot"


@dataclass(frozen=True)
class TableSync:
    """What a reconciliation changed: lots added, moved to another attempt, dropped."""

    added: int = 0
    moved: int = 0
    dropped: int = 0


def sync_table(
    spark: SparkSession,
    lineage: Lineage,
    namespace: str,
    dataset: str,
    table: str,
    *,
    options: Mapping[str, str] | None = None,
) -> TableSync:
    """Make ``table`` list exactly the dataset's READY lots with data, each at its current attempt
    folder: created (external: dropping it or a partition never deletes data) when missing,
    partitions added, moved and dropped. A dataset none of whose lots has data yet gets no table."""
    check_table_name(table)
    published = lineage.reading.published(namespace, dataset)
    wanted = {m.lot: _folder(m) for m in published.manifests if m.objects}
    sample = next((o for _, o in published.objects()), published.sample)
    if sample is None:
        return TableSync()
    _create(spark, table, sample, lineage.storage.dataset_uri(namespace, dataset), options or {})
    have = _partitions(spark, table)
    dropped = sorted(set(have) - set(wanted))
    added = {lot: wanted[lot] for lot in sorted(set(wanted) - set(have))}
    moved = {
        lot: wanted[lot] for lot in sorted(set(wanted) & set(have)) if _key(have[lot]) != _key(wanted[lot])
    }
    if dropped:
        spark.sql(f"ALTER TABLE {_quoted(table)} DROP IF EXISTS {', '.join(_spec(lot) for lot in dropped)}")
    if added:
        specs = " ".join(f"{_spec(lot)} LOCATION {_literal(folder)}" for lot, folder in added.items())
        spark.sql(f"ALTER TABLE {_quoted(table)} ADD IF NOT EXISTS {specs}")
    for lot, folder in moved.items():
        spark.sql(f"ALTER TABLE {_quoted(table)} {_spec(lot)} SET LOCATION {_literal(folder)}")
    return TableSync(len(added), len(moved), len(dropped))


class CatalogTables:
    """The tables a pipeline declares (``p.dataset(..., table=...)``), kept by its runner: each
    lot's partition moved right after the runner's own commit (``published``), every table
    reconciled when a run or a worker starts (``sync``), and a worker's every round following the
    lot event log for the lots others changed (``follow``: reopened, published, released)."""

    def __init__(
        self, spark: SparkSession, lineage: Lineage, namespace: str, tables: Mapping[str, str]
    ) -> None:
        """``tables``: table name by dataset name."""
        self._spark = spark
        self._lineage = lineage
        self._namespace = namespace
        self._tables = dict(tables)
        self._lock = threading.Lock()  # `--workers` threads share the session's catalog
        #: The lot event log's position the tables are known to be right up to (None: never synced).
        self._position: int | None = None

    def sync(self, options: Mapping[str, Mapping[str, str]]) -> dict[str, TableSync]:
        """``sync_table`` of every table, when a run starts. A table lotline refuses (its dataset has
        a ``lot`` column, a lot in no one folder) raises; a catalog that fails is logged, and the run
        goes on: lots are published whatever the catalog's state."""
        if not self._tables:
            return {}
        done = {}
        with self._lock:
            position = self._lineage.lot_events.last_position()  # later events: ``follow``
            for dataset, table in self._tables.items():
                try:
                    given = options.get(dataset)
                    done[dataset] = sync_table(
                        self._spark, self._lineage, self._namespace, dataset, table, options=given
                    )
                except LotlineError:
                    raise
                except Exception as error:
                    log.warning("table %s: not reconciled with the lots of %s (%s)", table, dataset, error)
                    return done  # the position stays: the next start tries again
            self._position = position
        return done

    def follow(self) -> int:
        """Move the partitions of the lots the lot event log names since the last look (another
        worker's publication, an operator's invalidation or release): each to its current attempt
        if READY with data, else dropped. Returns how many lots were looked at."""
        if not self._tables or self._position is None:
            return 0
        with self._lock:
            events = self._lineage.lot_events.after(
                self._position, namespace=self._namespace, datasets=list(self._tables), limit=1000
            )
            if not events:
                return 0
            named: dict[str, set[str]] = {}
            for event in events:
                named.setdefault(event.dataset, set()).add(event.lot)
            try:
                for dataset, lots in named.items():
                    current = self._lineage.reading.published_among(self._namespace, dataset, sorted(lots))
                    for lot in sorted(lots):
                        manifest = current.get(lot)
                        self._move(dataset, lot, manifest.objects if manifest else (), manifest)
            except LotlineError:
                raise
            except Exception as error:
                log.warning("tables of %s: lot events not followed (%s); tried again", self._namespace, error)
                return 0
            self._position = events[-1].position
            return sum(len(lots) for lots in named.values())

    def published(self, dataset: str, lot: str, objects: Sequence[ManifestObject], location: str) -> None:
        """Right after the commit that published ``lot``: its partition points at this attempt (or
        is dropped: the lot is empty now). A catalog that fails is logged; the lot stays published,
        and the next run's ``sync`` repairs the table."""
        if dataset not in self._tables:
            return
        with self._lock:
            try:
                self._move(dataset, lot, objects, location)
            except Exception as error:  # the lot is committed: a catalog problem must not fail it
                log.warning(
                    "table %s: lot %s not moved to its new attempt (%s); the next run repairs it",
                    self._tables[dataset],
                    lot,
                    error,
                )

    def _move(
        self, dataset: str, lot: str, objects: Sequence[ManifestObject], where: str | Manifest | None
    ) -> None:
        """The lot's partition at ``where`` (a location, or a manifest's attempt folder), or none when
        the lot has no ``objects``; a table not made yet is made whole by ``sync_table``."""
        table = self._tables[dataset]
        if not objects or where is None:
            if self._spark.catalog.tableExists(table):
                self._spark.sql(f"ALTER TABLE {_quoted(table)} DROP IF EXISTS {_spec(lot)}")
            return
        if not self._spark.catalog.tableExists(table):
            sync_table(self._spark, self._lineage, self._namespace, dataset, table)
            return
        folder = _folder(where) if isinstance(where, Manifest) else where.rstrip("/")
        quoted, spec = _quoted(table), _spec(lot)
        self._spark.sql(f"ALTER TABLE {quoted} ADD IF NOT EXISTS {spec} LOCATION {_literal(folder)}")
        self._spark.sql(f"ALTER TABLE {quoted} {spec} SET LOCATION {_literal(folder)}")


def _folder(manifest: Manifest) -> str:
    """The one folder a partition can point at: the attempt's, holding every object it lists."""
    folder = manifest.location.rstrip("/")
    for found in manifest.objects:
        if posixpath.dirname(found.uri) != folder:
            raise InvalidInput(
                f"{manifest.dataset} lot {manifest.lot}: {found.uri} is not in its attempt's folder "
                f"{folder}, so no partition can point at the lot (lots computed in parts, files ingested "
                "in place): read it with lotline.read or lotline files."
            )
    return folder


def _create(
    spark: SparkSession, table: str, sample: ManifestObject, location: str, options: Mapping[str, str]
) -> None:
    if spark.catalog.tableExists(table):
        return
    reader = spark.read.format(sample.format).options(**options)
    if sample.format == "text":
        reader = reader.schema(TEXT_SCHEMA)
    schema = reader.load(sample.uri).schema
    if LOT in schema.names:
        raise InvalidInput(f"table {table}: the dataset has a column {LOT!r}, the table's partition column.")
    columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)
    given = ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in sorted(options.items()))
    if "." in table:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS `{table.split('.', maxsplit=1)[0]}`")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {_quoted(table)} ({columns}, `{LOT}` string) USING {sample.format} "
        f"{f'OPTIONS ({given}) ' if given else ''}PARTITIONED BY (`{LOT}`) LOCATION {_literal(location)}"
    )


def _partitions(spark: SparkSession, table: str) -> dict[str, str]:
    """The table's partitions: their locations by lot, from the catalog in one call."""
    database, _, name = table.rpartition(".")
    catalog = spark._jsparkSession.sessionState().catalog().externalCatalog()
    nothing = spark._jvm.scala.Option.empty()  # type: ignore[union-attr]
    found = catalog.listPartitions(database or spark.catalog.currentDatabase(), name, nothing)
    partitions = {}
    for index in range(found.size()):
        partition = found.apply(index)
        partitions[str(partition.spec().apply(LOT))] = str(partition.location().toString())
    return partitions


def _key(location: str) -> str:
    """A folder as the catalog and a manifest (``file:///``, as written) name it. The catalog's is
    percent-encoded, and Hive's metastore hands a partition's back encoded twice (``a b`` is
    ``a%2520b``), so both are decoded until nothing changes."""
    for _ in range(4):
        decoded = unquote(location)
        if decoded == location:
            break
        location = decoded
    return object_key(location).rstrip("/")


def _spec(lot: str) -> str:
    return f"PARTITION (`{LOT}` = {_literal(lot)})"


def _quoted(table: str) -> str:
    return ".".join(f"`{part}`" for part in table.split("."))


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def declared_tables(pipeline: Pipeline) -> dict[str, str]:
    """The pipeline's tables by dataset. Only a dataset it writes whole (each lot in one attempt
    folder) can have one: a source's files stay where they landed, and a lot computed in parts
    keeps the parts of earlier attempts."""
    writers = {spec.name: job for job in pipeline.ordered_jobs() for spec in job.outputs}
    tables = {}
    for spec in pipeline.datasets.values():
        if spec.table is None:
            continue
        job = writers.get(spec.name)
        if job is None:
            raise PipelineError(
                f"dataset {spec.name}: table {spec.table}: only a dataset a job of the pipeline writes "
                "can have a table (read the others with lotline.read or lotline files)."
            )
        if job.partition_by is not None:
            raise PipelineError(
                f"dataset {spec.name}: table {spec.table}: job {job.name} computes its lots in parts, "
                "which no one folder holds (read it with lotline.read or lotline files)."
            )
        tables[spec.name] = spec.table
    return tables
