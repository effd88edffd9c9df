"""The schema's single source of truth (SQLAlchemy Core). Migrations must reproduce it exactly;
``tests/contract/test_migrations.py`` proves it on every supported database.

Conventions: lot columns are NOT NULL with ``''`` meaning "not partitioned" (see
``lotline.domain.versions.UNPARTITIONED``) so that unique keys over lots behave alike on SQLite
and PostgreSQL. ``dataset_version_counters`` holds the per-dataset version counter: it is
incremented by one upsert under that row's lock, held until commit, which is what keeps
concurrent writers from ever sharing or skipping a number. It is a table of its own so that the
dataset row, which every coordination row and run record references, is never updated by a
completion (see the table).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)

from lotline.store.types import BigId, JsonDocument, UtcDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

NAME = 1024
LOT = 128
PART = 512
RUN_STATES = "'NEW', 'RUNNING', 'COMPLETED', 'FAILED', 'ABORTED'"
VERSION_STATES = "'current', 'failed', 'superseded'"
DATA_STATUSES = "'RUNNING', 'READY', 'DONE', 'ERROR', 'RESUBMIT', 'PENDING', 'HOLD'"
OWNER = 200


def _timestamps() -> list[Column[object]]:
    return [
        Column("created_at", UtcDateTime, nullable=False),
        Column("updated_at", UtcDateTime, nullable=False),
    ]


namespaces = Table(
    "namespaces",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("name", String(NAME), nullable=False, unique=True),
    Column("owner_name", String(NAME)),
    Column("description", Text),
    *_timestamps(),
    # Soft delete (Marquez ``DELETE namespace``: ``isHidden``), undone by a later write.
    Column("deleted_at", UtcDateTime),
)

sources = Table(
    "sources",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("name", String(NAME), nullable=False, unique=True),
    Column("type", String(64), nullable=False),
    Column("connection_url", Text),
    Column("description", Text),
    *_timestamps(),
)

datasets = Table(
    "datasets",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("namespace_id", ForeignKey("namespaces.id"), nullable=False),
    Column("name", String(NAME), nullable=False),
    Column("type", String(32), nullable=False),
    Column("physical_name", String(NAME)),
    Column("source_id", ForeignKey("sources.id")),
    Column("description", Text),
    Column("facets", JsonDocument),
    *_timestamps(),
    # Where a STREAM dataset's schema is published (a schema registry URL), as Marquez keeps it.
    Column("schema_location", Text),
    # Soft delete (Marquez ``DELETE dataset``): hidden from reads until written again.
    Column("deleted_at", UtcDateTime),
    UniqueConstraint("namespace_id", "name"),
)

# The version counter of a dataset, created by its first version (or its first ``lock_dataset``).
# Not a column of ``datasets``: inserting a row that references a dataset (a claim's data-status
# rows, run inputs and outputs, a version) share-locks the dataset row, and when that row is also
# being updated by concurrent completions PostgreSQL turns each such lock into a new multixact on
# a long update chain — with eight workers on one job that cost a quarter of the claim throughput
# (docs/benchmarks.md).
dataset_version_counters = Table(
    "dataset_version_counters",
    metadata,
    Column("dataset_id", ForeignKey("datasets.id"), primary_key=True),
    Column("last_version_number", Integer, nullable=False),
)

dataset_fields = Table(
    "dataset_fields",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("dataset_id", ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("name", String(NAME), nullable=False),
    Column("type", String(255)),
    Column("description", Text),
    UniqueConstraint("dataset_id", "name"),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("namespace_id", ForeignKey("namespaces.id"), nullable=False),
    Column("name", String(NAME), nullable=False),
    Column("type", String(32), nullable=False),
    Column("description", Text),
    # Points into job_versions; no foreign key because jobs <-> job_versions form a cycle that
    # SQLite cannot add with ALTER. Written only by store.queries.jobs.
    Column("current_version_id", Uuid),
    *_timestamps(),
    # OpenLineage job facets, merged event by event (unknown facets are kept).
    Column("facets", JsonDocument),
    # Soft delete (Marquez ``DELETE job``): hidden from reads until written again.
    Column("deleted_at", UtcDateTime),
    # The job of the parent run (OpenLineage parent facet): Marquez's ``parentJobName``. Kept when
    # a later event has no parent. No foreign key: SQLite cannot add one to an existing table.
    Column("parent_job_id", Uuid),
    UniqueConstraint("namespace_id", "name"),
    # The lineage graph walks dataset -> job versions -> the jobs whose *current* version it is.
    Index(None, "current_version_id"),
)

job_versions = Table(
    "job_versions",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("job_id", ForeignKey("jobs.id"), nullable=False, index=True),
    Column("location", Text),
    Column("created_at", UtcDateTime, nullable=False),
)

job_version_io = Table(
    "job_version_io",
    metadata,
    Column("job_version_id", ForeignKey("job_versions.id"), primary_key=True),
    Column("dataset_id", ForeignKey("datasets.id"), primary_key=True, index=True),
    Column("role", String(8), primary_key=True),
    CheckConstraint("role IN ('INPUT', 'OUTPUT')", name="role"),
)

# Datasets a job version's runs were seen reading without declaring them (dynamic lineage, SPEC
# §7: Spark's plans of the writes). Apart from job_version_io, which holds the declared inputs and
# outputs that coordination and version ids follow; the lineage graph shows both.
job_version_reads = Table(
    "job_version_reads",
    metadata,
    Column("job_version_id", ForeignKey("job_versions.id"), primary_key=True),
    Column("dataset_id", ForeignKey("datasets.id"), primary_key=True, index=True),
    # The first run seen reading it.
    Column("run_id", ForeignKey("runs.id"), nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("job_id", ForeignKey("jobs.id"), nullable=False),
    Column("job_version_id", ForeignKey("job_versions.id")),
    Column("parent_run_id", ForeignKey("runs.id"), index=True),
    Column("lot", String(LOT), nullable=False, server_default=text("''")),
    Column("state", String(16), nullable=False),
    Column("nominal_start_time", UtcDateTime),
    Column("nominal_end_time", UtcDateTime),
    Column("started_at", UtcDateTime),
    Column("ended_at", UtcDateTime),
    Column("args", JsonDocument),
    Column("facets", JsonDocument),
    # Why a FAILED run failed, in one line (domain/failures.py): what status, gaps, lot events and
    # the run summary show; the full stack stays in the ``errorMessage`` facet.
    Column("error", Text),
    # Its kind, as data (``Failure.kind``: the lotline error's code, ``check_failed`` for a failing
    # check; NULL for other errors): the gap report counts check failures by it, not by the text.
    Column("error_kind", String(64)),
    *_timestamps(),
    CheckConstraint(f"state IN ({RUN_STATES})", name="state"),
    Index(None, "job_id", "created_at"),
    # Stale lots: the runs of a job's older versions (services/gaps, docs/lots.md "Stale lots").
    Index(None, "job_version_id"),
)

run_transitions = Table(
    "run_transitions",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("run_id", ForeignKey("runs.id"), nullable=False, index=True),
    Column("state", String(16), nullable=False),
    Column("transitioned_at", UtcDateTime, nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
    CheckConstraint(f"state IN ({RUN_STATES})", name="state"),
)

dataset_versions = Table(
    "dataset_versions",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("dataset_id", ForeignKey("datasets.id"), nullable=False),
    Column("version_number", Integer, nullable=False),
    Column("lot", String(LOT), nullable=False, server_default=text("''")),
    Column("run_id", ForeignKey("runs.id"), index=True),
    Column("state", String(16), nullable=False),
    Column("fields", JsonDocument),
    Column("created_at", UtcDateTime, nullable=False),
    # The dataset facets the version was made with (Marquez shows them on the version): the
    # dataset's facets when the version was minted, plus the writer's output facets
    # (``outputStatistics``…).
    Column("facets", JsonDocument),
    CheckConstraint(f"state IN ({VERSION_STATES})", name="state"),
    UniqueConstraint("dataset_id", "version_number"),
    Index(None, "dataset_id", "lot", "state"),
    # Last line of defence for rule 7: at most one current version per (dataset, lot).
    Index(
        "uq_dataset_versions_one_current",
        "dataset_id",
        "lot",
        unique=True,
        postgresql_where=text("state = 'current'"),
        sqlite_where=text("state = 'current'"),
    ),
)


def _run_io_table(name: str) -> Table:
    """Inputs and outputs of runs have the same shape: one row per (run, dataset, lot)."""
    return Table(
        name,
        metadata,
        Column("id", BigId, primary_key=True, autoincrement=True),
        Column("run_id", ForeignKey("runs.id"), nullable=False),
        Column("dataset_id", ForeignKey("datasets.id"), nullable=False, index=True),
        Column("lot", String(LOT), nullable=False, server_default=text("''")),
        Column("dataset_version_id", ForeignKey("dataset_versions.id"), index=True),
        Column("recorded_at", UtcDateTime, nullable=False),
        # The quality results the run reported for it (dataQualityAssertions/Metrics: its events'
        # wherever they put them, lotline's checks), domain/quality.py.
        Column("facets", JsonDocument),
        UniqueConstraint("run_id", "dataset_id", "lot"),
    )


run_inputs = _run_io_table("run_inputs")
run_outputs = _run_io_table("run_outputs")

lineage_events = Table(
    "lineage_events",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("event_type", String(16)),
    Column("event_time", UtcDateTime, nullable=False),
    Column("run_id", Uuid, index=True),
    Column("job_namespace", String(NAME)),
    Column("job_name", String(NAME)),
    Column("payload", JsonDocument, nullable=False),
    Column("received_at", UtcDateTime, nullable=False),
    # SHA-256 of the canonical JSON: a repeated event is stored once.
    Column("event_key", String(64)),
    # The journal is projected onto the lineage model in id order (services/projection.py):
    # set once the event was projected, or found impossible to project (then with the reason).
    Column("applied_at", UtcDateTime),
    Column("projection_error", Text),
    Index(None, "event_time"),
    Index("uq_lineage_events_event_key", "event_key", unique=True),
    # The backlog and the failures stay small, so their partial indexes stay small too.
    Index(
        "ix_lineage_events_pending",
        "id",
        postgresql_where=text("applied_at IS NULL"),
        sqlite_where=text("applied_at IS NULL"),
    ),
    Index(
        "ix_lineage_events_failed",
        "id",
        postgresql_where=text("projection_error IS NOT NULL"),
        sqlite_where=text("projection_error IS NOT NULL"),
    ),
)

tags = Table(
    "tags",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("name", String(NAME), nullable=False, unique=True),
    Column("description", Text),
    *_timestamps(),
)

dataset_tags = Table(
    "dataset_tags",
    metadata,
    Column("dataset_id", ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True),
    Column("tag_id", ForeignKey("tags.id"), primary_key=True, index=True),
    Column("tagged_at", UtcDateTime, nullable=False),
)

# Field tags are keyed by field *name*: a dataset's fields are replaced on every update, and a
# tag should survive a schema change that keeps the field.
job_tags = Table(
    "job_tags",
    metadata,
    Column("job_id", ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("tag_id", ForeignKey("tags.id"), primary_key=True, index=True),
    Column("tagged_at", UtcDateTime, nullable=False),
)

dataset_field_tags = Table(
    "dataset_field_tags",
    metadata,
    Column("dataset_id", ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True),
    Column("field_name", String(NAME), primary_key=True),
    Column("tag_id", ForeignKey("tags.id"), primary_key=True, index=True),
    Column("tagged_at", UtcDateTime, nullable=False),
)

# -- cooperative lot coordination (SPEC §4) ---------------------------------------------------

lot_jobs = Table(
    "lot_jobs",
    metadata,
    Column("job_id", ForeignKey("jobs.id"), primary_key=True),
    # Unique: a dataset has exactly one producing job (SPEC §4).
    Column("output_dataset_id", ForeignKey("datasets.id"), nullable=False, unique=True),
    # NULL: output lot = input lot; else e.g. 'PT5M->PT1H', 'PT1H->P1D[America/New_York]'
    # (see lotline.domain.coordination.LotMapping).
    Column("lot_mapping", String(96)),
    Column("held", Boolean, nullable=False, server_default=text("false")),
    *_timestamps(),
)

# Every output of a coordinated job, the first (``lot_jobs.output_dataset_id``, which carries the
# claim) included; ``dataset_id`` unique: a dataset has exactly one producing job, whichever output
# it is (docs/coordination.md "Jobs with several outputs").
lot_job_outputs = Table(
    "lot_job_outputs",
    metadata,
    Column("job_id", ForeignKey("lot_jobs.job_id"), primary_key=True),
    Column("dataset_id", ForeignKey("datasets.id"), primary_key=True, unique=True),
    # Declared order: 0 is the first output (the one that carries the claim).
    Column("position", Integer, nullable=False),
)

lot_job_inputs = Table(
    "lot_job_inputs",
    metadata,
    Column("job_id", ForeignKey("lot_jobs.job_id"), primary_key=True),
    Column("dataset_id", ForeignKey("datasets.id"), primary_key=True, index=True),
)

data_status = Table(
    "data_status",
    metadata,
    Column("dataset_id", ForeignKey("datasets.id"), primary_key=True),
    Column("lot", String(LOT), primary_key=True),
    Column("job_id", ForeignKey("jobs.id"), primary_key=True),
    Column("role", String(8), nullable=False),
    Column("status", String(16), nullable=False),
    # While HOLD: the status to return to on release (NULL: the row is removed on release).
    Column("held_status", String(16)),
    Column("attempt", Integer, nullable=False, server_default=text("0")),
    Column("owner", String(OWNER)),
    Column("lease_expires_at", UtcDateTime),
    # The claim that wrote the row: every row of one claim carries its run, so a claim's
    # INPUT rows are found from its OUTPUT row whatever the lot mapping.
    Column("run_id", ForeignKey("runs.id"), index=True),
    # A failed attempt's partial data was deleted: the arc is missing, not partial (SPEC §5).
    Column("data_removed_at", UtcDateTime),
    *_timestamps(),
    CheckConstraint("role IN ('INPUT', 'OUTPUT')", name="role"),
    CheckConstraint(f"status IN ({DATA_STATUSES})", name="status"),
    # The claim search: READY lots of one dataset, in lot order.
    Index(None, "dataset_id", "role", "status", "lot"),
    # The reaper: expired RUNNING claims.
    Index(None, "status", "lease_expires_at"),
    Index(None, "job_id", "role", "status"),
)

# READY OUTPUT rows of data_status counted by ten consecutive lots: ``lot_prefix`` is the lot id
# less its last character (an interval lot's ordinal less its last digit: ten lots, or a whole day
# of lots when a day has ten or fewer). Append-only deltas: database triggers on data_status
# (migration 0018: statement-level on PostgreSQL, row-level on SQLite) only INSERT the change a
# write made to a key, so no writer ever waits on a counter row; a key's count is the sum of its
# rows. Compaction merges a key's rows into one without waiting on anybody (SKIP LOCKED,
# store/queries/gaps.compact_ready_counts). Gap reports read the sums to skip the lots of complete
# stretches one by one (docs/lots.md, "Reading complete stretches"). Derived data: no foreign keys.
ready_lot_counts = Table(
    "ready_lot_counts",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("dataset_id", Uuid, nullable=False),
    Column("lot_prefix", String(LOT), nullable=False),
    Column("job_id", Uuid, nullable=False),
    Column("lots", Integer, nullable=False),
    # The reads of a dataset's range and the compaction's scope; ``lots`` in it: an index-only sum.
    Index(None, "dataset_id", "lot_prefix", "job_id", "lots"),
)

# The claim search's work list: (job, lot) pairs that may have become eligible since the job last
# looked (a lot of one of its inputs became READY, or its own output was failed or reopened). For a
# mapped job the lot is an input lot or an output lot; the search maps it to the output lot. Rows
# are hints: the search checks eligibility and deletes what it looked at, so the list holds pending
# work, not history, and the search costs the same after 200 lots or 200,000.
lot_frontier = Table(
    "lot_frontier",
    metadata,
    Column("job_id", ForeignKey("lot_jobs.job_id"), primary_key=True),
    Column("lot", String(LOT), primary_key=True),
    # Set by every upsert: raising a hint must update (and so wait for) a row a searcher holds.
    Column("touched_at", UtcDateTime, nullable=False),
    # A retry hint (the job's own failure of the lot): not taken before then, the back-off shared
    # by every worker. Any other hint raised for the lot replaces it (NULL: due at once).
    Column("not_before", UtcDateTime),
    # The lot's failures in a row that this hint retries (0: not a retry); doubles the back-off.
    Column("failures", Integer, nullable=False, server_default=text("0")),
)

# -- lots on storage (SPEC §5) ----------------------------------------------------------------

MANIFEST_STATES = "'complete', 'empty', 'partial', 'removed'"

# One row per attempt at a lot that wrote (or tried to write) data: the authority on which
# objects a lot consists of. A lot's readable manifest is the one of its current version
# (``version_id`` → ``dataset_versions.state = 'current'``), so a lot has exactly one readable
# manifest exactly when it is READY. ``objects`` is the list of objects, in the JSON form of
# ``ManifestObject.to_json``.
manifests = Table(
    "manifests",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("dataset_id", ForeignKey("datasets.id"), nullable=False),
    Column("lot", String(LOT), nullable=False),
    Column("run_id", ForeignKey("runs.id"), index=True),
    Column("version_id", ForeignKey("dataset_versions.id"), unique=True),
    Column("attempt", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("uri_type", String(16), nullable=False),
    Column("location", Text, nullable=False),
    Column("objects", JsonDocument, nullable=False),
    Column("object_count", Integer, nullable=False),
    Column("total_bytes", BigInteger, nullable=False),
    Column("row_count", BigInteger),
    Column("comment", Text),
    *_timestamps(),
    # A child's manifest: the part of the lot it computed (``day=2023-01-02``); NULL for the lot's
    # own manifest. Parts are never read directly: the lot's manifest lists their objects.
    Column("part", String(PART)),
    # An empty lot's manifest: who declared the lot empty (the sender's marker, an operator, the
    # source's arrival policy: domain/arrival.py); NULL for every other manifest.
    Column("declared_by", Text),
    # When ``lotline cleanup`` deleted the objects of a superseded version's manifest (its grace
    # over, docs/lots.md "Crash safety and cleanup"); NULL while they are kept (migration 0023).
    Column("objects_removed_at", UtcDateTime),
    CheckConstraint(f"state IN ({MANIFEST_STATES})", name="state"),
    Index(None, "dataset_id", "lot", "state"),
    # The lot grid's empty lots of a range (``store/queries/gaps.empty_lots``): the dataset's EMPTY
    # manifests in lot order, read from the index alone (migration 0019).
    Index(None, "dataset_id", "state", "lot", "version_id"),
    # Partial manifests waiting for their objects to be removed (cleanup's work list).
    Index(
        "ix_manifests_partial",
        "created_at",
        postgresql_where=text("state = 'partial'"),
        sqlite_where=text("state = 'partial'"),
    ),
)

LOT_EVENT_KINDS = "'READY', 'REOPENED', 'FAILED', 'OVERDUE'"

# The durable, ordered lot availability log: appended in the transaction that makes a lot READY
# (or reopens it, or fails it). ``id`` is the position; appends take an exclusive lock first (see
# store/queries/lot_events.py), so positions are assigned in commit order and a reader that has
# seen position N can never later find a new event below N.
lot_events = Table(
    "lot_events",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("dataset_id", ForeignKey("datasets.id"), nullable=False),
    Column("lot", String(LOT), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("manifest_id", ForeignKey("manifests.id")),
    Column("version_id", ForeignKey("dataset_versions.id")),
    Column("run_id", ForeignKey("runs.id")),
    Column("created_at", UtcDateTime, nullable=False),
    # FAILED events: the failed claim's attempt and the failure's one-line reason.
    Column("attempt", Integer),
    Column("reason", Text),
    CheckConstraint(f"kind IN ({LOT_EVENT_KINDS})", name="kind"),
    Index(None, "dataset_id", "id"),
)

ABSENCES = "'missing', 'empty'"

# A source dataset's arrival policy (domain/arrival.py): how long after an interval ends its data
# may still arrive, and what a due interval with nothing delivered is. A source without a row has
# the default policy. ``noticed_through``: the arrival pass (services/arrival.py) has noticed every
# lot that ends at or before this instant once it was due (an OVERDUE event, or an empty
# declaration by the policy); NULL: not yet watched. ``declared_in`` says where the policy was
# declared (a pipeline file, ``lotline ingest``, lotline.toml).
arrival_policies = Table(
    "arrival_policies",
    metadata,
    Column("dataset_id", ForeignKey("datasets.id"), primary_key=True),
    # The source's lot interval (PT5M …): which lots the arrival pass notices.
    Column("lot_interval", String(64), nullable=False),
    Column("late_after_seconds", Integer, nullable=False),
    Column("absent", String(16), nullable=False),
    Column("declared_in", Text, nullable=False),
    Column("noticed_through", UtcDateTime),
    *_timestamps(),
    CheckConstraint(f"absent IN ({ABSENCES})", name="absent"),
    CheckConstraint("late_after_seconds >= 0", name="late_after_seconds"),
    # The pass's work list: the watches whose next lot may be due.
    Index(None, "noticed_through"),
)

# Webhook delivery of lot events: one row per configured URL, holding the position delivered up
# to, so a restarted deliverer resumes where it stopped (at least once).
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("url", String(NAME), primary_key=True),
    Column("position", BigInteger, nullable=False, server_default=text("0")),
    Column("failures", Integer, nullable=False, server_default=text("0")),
    Column("last_error", Text),
    Column("next_attempt_at", UtcDateTime),
    *_timestamps(),
)
