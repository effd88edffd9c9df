"""The lineage graph of ``bench/lineage_query`` written straight into the projected tables, set-based.

Projecting the OpenLineage events of 100,000 jobs takes over an hour (~27 jobs/s), so the large
sizes are seeded with a few ``INSERT … SELECT`` over ``generate_series`` (PostgreSQL), writing the
rows the projector writes for the same events (``lineage_query._chain``): one namespace, each
dataset (``DB_TABLE``, its name as physical name, no facets), each job (``BATCH``) with one current
version, and the version's declared inputs and outputs. Not written: the journal rows (nothing is
pending) and the projector's version ids (derived from the event; here random), which no lineage
answer shows. ``python -m bench.lineage_query --check`` seeds a few chains both ways and compares
the answers.
"""

from __future__ import annotations

import datetime as dt
import uuid

import sqlalchemy as sa

from bench._seed import analyze
from lotline.store.engine import Store
from lotline.store.types import UtcDateTime

#: The events' shape (``lineage_query._chain``): jobs per chain, shared hub datasets.
LENGTH, HUBS = 20, 10

_CHAINS = "SELECT generate_series(0, :chains - 1) AS c"
_STEPS = f"SELECT c, k FROM ({_CHAINS}) AS chains, generate_series(0, {LENGTH - 1}) AS k"

#: Every dataset name: the hubs the chains read, each chain's d0..d20 and side0..side18.
_DATASETS = f"""
    SELECT 'hub' || h AS name FROM generate_series(0, least(:chains, {HUBS}) - 1) AS h
    UNION ALL SELECT 'c' || c || '/d' || k FROM ({_CHAINS}) AS chains, generate_series(0, {LENGTH}) AS k
    UNION ALL SELECT 'c' || c || '/side' || k FROM ({_STEPS}) AS steps WHERE k < {LENGTH - 1}"""

#: Every (job, dataset, role) edge: job k reads d(k) (the first also its hub), writes d(k+1) and,
#: but the last, side(k).
_EDGES = f"""
    SELECT c, k, 'c' || c || '/d' || k AS dataset, 'INPUT' AS role FROM ({_STEPS}) AS steps
    UNION ALL SELECT c, 0, 'hub' || (c % {HUBS}), 'INPUT' FROM ({_CHAINS}) AS chains
    UNION ALL SELECT c, k, 'c' || c || '/d' || (k + 1), 'OUTPUT' FROM ({_STEPS}) AS steps
    UNION ALL SELECT c, k, 'c' || c || '/side' || k, 'OUTPUT' FROM ({_STEPS}) AS steps
        WHERE k < {LENGTH - 1}"""

_STATEMENTS = (
    "INSERT INTO namespaces (id, name, created_at, updated_at) VALUES (:ns, 'bench', :now, :now)",
    f"""INSERT INTO datasets (id, namespace_id, name, type, physical_name, facets, created_at, updated_at)
        SELECT gen_random_uuid(), :ns, name, 'DB_TABLE', name, CAST('{{}}' AS jsonb), :now, :now
        FROM ({_DATASETS}) AS names""",
    f"""INSERT INTO jobs (id, namespace_id, name, type, current_version_id, created_at, updated_at)
        SELECT gen_random_uuid(), :ns, 'c' || c || '/job' || k, 'BATCH', gen_random_uuid(), :now, :now
        FROM ({_STEPS}) AS steps""",
    "INSERT INTO job_versions (id, job_id, created_at) SELECT current_version_id, id, :now FROM jobs",
    f"""INSERT INTO job_version_io (job_version_id, dataset_id, role)
        SELECT j.current_version_id, d.id, e.role FROM ({_EDGES}) AS e
        JOIN jobs AS j ON j.namespace_id = :ns AND j.name = 'c' || e.c || '/job' || e.k
        JOIN datasets AS d ON d.namespace_id = :ns AND d.name = e.dataset""",
)


_TYPES = {"ns": sa.Uuid(), "now": UtcDateTime()}


def seed_tables(url: str, chains: int) -> None:
    """Write ``chains`` chains into an empty, migrated PostgreSQL database, then analyze it."""
    store = Store(url)
    if store.backend != "postgresql":
        raise SystemExit("the set-based lineage seeder writes PostgreSQL only")
    params = {"ns": uuid.uuid4(), "now": dt.datetime.now(dt.UTC), "chains": chains}
    with store.write() as connection:
        for statement in _STATEMENTS:
            used = {k: v for k, v in params.items() if f":{k}" in statement}
            typed = [sa.bindparam(k, type_=_TYPES[k]) for k in used if k in _TYPES]
            text = sa.text(statement).bindparams(*typed)
            connection.execute(text, used)
    analyze(store)
    store.dispose()
