"""claims never wait: the claim function locks the lot's rows without waiting (issue 39.19)

Revision ID: 0022_claims_never_wait
Revises: 0021_run_io_facets
Create Date: 2026-11-28

A claim holds the work-list hints it took (``lot_frontier`` rows it deleted) when it writes the
lot's ``data_status`` rows. A failure, a reap or an invalidation changes a lot's rows first and
hints the job again after; a claim that waited for such a transaction's row waited for it while it
waited for the claim's hint: a deadlock (seen on PostgreSQL between concurrent failures). So
``lotline_claim_next_lot`` now locks the lot's existing rows with ``NOWAIT`` before it writes them:
a row another transaction is changing is a lost race (SQLSTATE 55P03, ``claim_functions.LostRace``),
as it would be once that transaction commits. The Python path does the same
(``store/queries/claims.take_claim``). PostgreSQL only; nothing else changes.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0022_claims_never_wait"
down_revision = "0021_run_io_facets"
branch_labels = None
depends_on = None

ANCHOR = "    -- One statement: recording.create_started_run"
NO_WAIT = """    -- The lot's rows locked without waiting (migration 0022): this call holds the hints it took.
    PERFORM 1 FROM data_status r
     WHERE r.job_id = p_job AND r.lot = claimed_lot AND r.dataset_id = ANY (p_inputs || p_output)
       FOR UPDATE NOWAIT;

"""


def _claim_next_lot_0016() -> str:
    """0016's function, read from its own file, so that the downgrade restores exactly its SQL."""
    path = Path(__file__).with_name("0016_failures_pushed.py")
    spec = importlib.util.spec_from_file_location("lotline_migration_0016", path)
    if spec is None or spec.loader is None:
        raise RuntimeError("migration 0016 not found")
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text: str = module.CLAIM_NEXT_LOT
    return text.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        function = _claim_next_lot_0016()
        if ANCHOR not in function:
            raise RuntimeError("migration 0016's claim function changed: 0022 cannot patch it")
        op.execute(function.replace(ANCHOR, NO_WAIT + ANCHOR, 1))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_claim_next_lot_0016())
