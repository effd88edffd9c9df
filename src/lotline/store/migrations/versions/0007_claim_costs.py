"""version counters in a table of their own; claim functions planned once and in fewer statements

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22

Same behaviour as 0006 (``tests/coordination/test_claim_functions.py`` still compares every row
with the Python path's), less database time per lot. Measured with ``perf`` and
``pg_stat_statements`` (one worker) and with ``bench/claims`` (eight), 0006 spent it on:

- the version counter in the dataset row. Every row a claim inserts that references the dataset
  (data-status rows, run inputs and outputs, the version) share-locks the dataset row for its
  foreign key; with completions updating that same row, PostgreSQL makes each such lock a new
  multixact on a growing update chain. The counter moves to ``dataset_version_counters``
  (created with a dataset's first version); the dataset row is no longer written by completions.
  Eight workers on one job: about +25% claims per second.
- planning: PL/pgSQL re-plans a statement whose generic plan looks worse than a custom one. The
  frontier pop (``DELETE … USING picked``) had a generic plan that hashed the whole frontier, so
  it was re-planned on every claim. It now deletes by ``lot = ANY (ARRAY(…))``, an index scan
  whatever the parameters, and both functions run with ``plan_cache_mode = force_generic_plan``:
  every statement in them is a key lookup or a write of a few rows, whose generic plan is the
  one a custom plan would pick.
- per-statement overhead (executor start and end, locks, snapshot): the claim's writes are now
  one statement of data-modifying CTEs (foreign keys are checked at its end), and most of the
  completion's are one too. Statements that take row locks others may want stay apart and in
  0006's order — the claim's rows, the run, the dataset's version counter, the lot's current
  version — which is the order of the Python path and of the reaper.
- a recount of the run's inputs to detect an unversioned one: now read from the insert's
  ``RETURNING``.

Database time per claimed and completed lot, one worker: about 2.0 ms → 1.2 ms.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

CLAIM_NEXT_LOT = """CREATE OR REPLACE FUNCTION lotline_claim_next_lot(
    p_job uuid, p_stamp timestamptz, p_version uuid, p_output uuid, p_inputs uuid[],
    p_owner text, p_run uuid, p_lease interval,
    OUT claimed_lot text, OUT claimed_attempt integer, OUT started_at timestamptz,
    OUT lease_expires_at timestamptz)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    batch integer := 1;
    hints text[];
    hint text;
    eligible text[];
    wanted integer := 1 + cardinality(p_inputs);
    taken integer;
    unversioned integer;
    p_now timestamptz;
    blocked integer;
    ready integer;
    locked integer;
    last_attempt integer;
BEGIN
    LOOP
        -- The job's next hints (claims.next_candidate / frontier.pop with a guard): none unless the
        -- job is not held and its registration and current version are what the caller cached.
        WITH picked AS MATERIALIZED (
            SELECT f.lot FROM lot_frontier f
            WHERE f.job_id = p_job AND EXISTS (
                SELECT 1 FROM lot_jobs lj JOIN jobs j ON j.id = lj.job_id
                WHERE lj.job_id = p_job AND NOT lj.held AND lj.updated_at = p_stamp
                  AND j.current_version_id IS NOT DISTINCT FROM p_version)
            ORDER BY f.lot LIMIT batch FOR UPDATE OF f SKIP LOCKED),
        taken AS (
            DELETE FROM lot_frontier f
            WHERE f.job_id = p_job AND f.lot = ANY (ARRAY(SELECT lot FROM picked)) RETURNING f.lot)
        SELECT array_agg(lot ORDER BY lot) INTO hints FROM taken;
        IF hints IS NULL THEN
            RETURN;
        END IF;
        -- SPEC §4 eligible: the job's output absent, ERROR or RESUBMIT; every input READY; no
        -- INPUT row of the job RUNNING or DONE on it. One read per hint: the rows of the lot that
        -- matter (primary-key lookups), counted by kind.
        FOREACH hint IN ARRAY hints LOOP
            SELECT count(*) FILTER (WHERE r.dataset_id = p_output AND r.role = 'OUTPUT'
                                      AND r.status NOT IN ('ERROR', 'RESUBMIT')),
                   count(*) FILTER (WHERE r.dataset_id = ANY (p_inputs) AND r.role = 'OUTPUT'
                                      AND r.status = 'READY'),
                   count(*) FILTER (WHERE r.dataset_id = ANY (p_inputs) AND r.job_id = p_job
                                      AND r.role = 'INPUT' AND r.status IN ('RUNNING', 'DONE')),
                   coalesce(max(r.attempt) FILTER (WHERE r.dataset_id = p_output AND r.role = 'OUTPUT'), 0)
              INTO blocked, ready, locked, last_attempt
              FROM data_status r
             WHERE r.dataset_id = ANY (p_inputs || p_output) AND r.lot = hint;
            CONTINUE WHEN blocked > 0 OR ready < cardinality(p_inputs) OR locked > 0;
            IF eligible IS NULL THEN
                claimed_attempt := last_attempt + 1;
            END IF;
            eligible := eligible || hint;
        END LOOP;
        EXIT WHEN eligible IS NOT NULL;
        IF cardinality(hints) < batch THEN
            RETURN;
        END IF;
        batch := least(2 * batch, 256);
    END LOOP;
    claimed_lot := eligible[1];
    -- The run starts now, after the check, by the database's clock (as its end will be): an earlier
    -- attempt that the check saw ended and committed before, so run intervals never overlap.
    p_now := clock_timestamp();
    started_at := p_now;
    lease_expires_at := p_now + p_lease;
    -- Eligible lots not chosen get their hint back.
    IF cardinality(eligible) > 1 THEN
        INSERT INTO lot_frontier (job_id, lot, touched_at)
        SELECT p_job, e.lot, p_now FROM unnest(eligible[2:]) AS e(lot) ORDER BY e.lot
        ON CONFLICT (job_id, lot) DO UPDATE SET touched_at = excluded.touched_at;
    END IF;

    -- One statement: recording.create_started_run (the run, its NEW and RUNNING transitions, its
    -- inputs and outputs with those its job version declares, at the run's lot, inputs pinned to
    -- current) and data_status.take_claim (OUTPUT RUNNING and the INPUT RUNNING read locks, each
    -- written only if still takeable: the mutex). Foreign keys are checked at the statement's end.
    WITH run AS (
        INSERT INTO runs (id, job_id, job_version_id, lot, state, started_at, args, facets,
                          created_at, updated_at)
        VALUES (p_run, p_job, p_version, claimed_lot, 'RUNNING', p_now, '{}', '{}', p_now, p_now)),
    transitions AS (
        INSERT INTO run_transitions (run_id, state, transitioned_at, recorded_at)
        VALUES (p_run, 'NEW', p_now, p_now), (p_run, 'RUNNING', p_now, p_now)),
    inputs AS (
        INSERT INTO run_inputs (run_id, dataset_id, lot, dataset_version_id, recorded_at)
        SELECT p_run, d.id, claimed_lot,
               (SELECT v.id FROM dataset_versions v
                WHERE v.dataset_id = d.id AND v.lot = claimed_lot AND v.state = 'current'),
               p_now
        FROM (SELECT unnest(p_inputs)
              UNION SELECT io.dataset_id FROM job_version_io io
                    WHERE io.job_version_id = p_version AND io.role = 'INPUT') AS d(id)
        ORDER BY d.id
        RETURNING dataset_version_id),
    outputs AS (
        INSERT INTO run_outputs (run_id, dataset_id, lot, recorded_at)
        SELECT p_run, d.id, claimed_lot, p_now
        FROM (SELECT p_output
              UNION SELECT io.dataset_id FROM job_version_io io
                    WHERE io.job_version_id = p_version AND io.role = 'OUTPUT') AS d(id)
        ORDER BY d.id),
    claim(dataset_id, role) AS (
        SELECT p_output, 'OUTPUT' UNION ALL SELECT i, 'INPUT' FROM unnest(p_inputs) AS i),
    took AS (
        INSERT INTO data_status AS ds (dataset_id, lot, job_id, role, status, attempt, owner,
                                       lease_expires_at, run_id, created_at, updated_at)
        SELECT c.dataset_id, claimed_lot, p_job, c.role, 'RUNNING', claimed_attempt, p_owner,
               lease_expires_at, p_run, p_now, p_now
        FROM claim c
        ON CONFLICT (dataset_id, lot, job_id) DO UPDATE SET
            status = excluded.status, owner = excluded.owner, attempt = excluded.attempt,
            run_id = excluded.run_id, lease_expires_at = excluded.lease_expires_at,
            data_removed_at = NULL, updated_at = excluded.updated_at
        WHERE (ds.role = 'OUTPUT' AND ds.status IN ('ERROR', 'RESUBMIT')
               AND ds.attempt = excluded.attempt - 1)
           OR (ds.role = 'INPUT' AND ds.status = 'ERROR')
        RETURNING 1)
    SELECT (SELECT count(*) FROM inputs WHERE dataset_version_id IS NULL), (SELECT count(*) FROM took)
      INTO unversioned, taken;
    IF unversioned > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'LT001',
            MESSAGE = 'lotline: an input of lot ' || claimed_lot || ' has no current version';
    END IF;
    -- Any row not written means another worker won the lot.
    IF taken <> wanted THEN
        RAISE EXCEPTION USING ERRCODE = 'LT002',
            MESSAGE = 'lotline: lot ' || claimed_lot || ' was just claimed by another worker';
    END IF;
END $$
"""


FINISH_CLAIM = """
CREATE OR REPLACE FUNCTION lotline_finish_claim(
    p_job uuid, p_run uuid, p_owner text, p_attempt integer, p_success boolean,
    p_at timestamptz, p_output uuid, p_lot text, p_version uuid)
RETURNS void
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    live boolean;
    target text := CASE WHEN p_success THEN 'COMPLETED' ELSE 'FAILED' END;
    ended_runs integer;
    unversioned text[];
    number integer;
    -- The database's clock, like the claim's start: p_at (when the run ended) defaults to it.
    p_now timestamptz := clock_timestamp();
BEGIN
    p_at := coalesce(p_at, p_now);
    -- claims.finish: fenced; OUTPUT READY + INPUTs DONE, or OUTPUT ERROR + INPUTs ERROR.
    WITH ended AS (
        UPDATE data_status SET
            status = CASE WHEN role = 'OUTPUT' THEN CASE WHEN p_success THEN 'READY' ELSE 'ERROR' END
                          ELSE CASE WHEN p_success THEN 'DONE' ELSE 'ERROR' END END,
            lease_expires_at = NULL, updated_at = p_now
        WHERE job_id = p_job AND run_id = p_run
          AND (role = 'INPUT' OR (owner = p_owner AND attempt = p_attempt AND status = 'RUNNING'
                                  AND lease_expires_at > p_now))
        RETURNING role)
    SELECT bool_or(role = 'OUTPUT') INTO live FROM ended;
    IF live IS NOT TRUE THEN
        RAISE EXCEPTION USING ERRCODE = 'LT003',
            MESSAGE = 'lotline: the claim of lot ' || p_lot || ' is no longer live';
    END IF;
    -- recording.apply_transition: RUNNING -> COMPLETED / FAILED, for a plain claim run only.
    WITH ran AS (
        UPDATE runs SET state = target, ended_at = p_at, updated_at = p_now
        WHERE id = p_run AND state = 'RUNNING' RETURNING 1)
    SELECT (SELECT count(*) FROM ran),
           (SELECT array_agg(dataset_id::text || ' ' || lot) FROM run_outputs
            WHERE run_id = p_run AND dataset_version_id IS NULL)
      INTO ended_runs, unversioned;
    IF ended_runs <> 1 OR unversioned IS DISTINCT FROM ARRAY[p_output::text || ' ' || p_lot] THEN
        RAISE EXCEPTION USING ERRCODE = 'LT001',
            MESSAGE = 'lotline: run ' || p_run || ' is not a plain claim run';
    END IF;
    -- Versioning (rules 3, 4, 7), in the Python path's lock order: the dataset's counter (its row
    -- locked until the commit, so that numbers follow commit order), then the lot's current version,
    -- superseded apart from the insert because the new current version's unique index entry is
    -- checked as it is inserted.
    INSERT INTO dataset_version_counters AS c (dataset_id, last_version_number) VALUES (p_output, 1)
    ON CONFLICT (dataset_id) DO UPDATE SET last_version_number = c.last_version_number + 1
    RETURNING last_version_number INTO number;
    IF p_success THEN
        UPDATE dataset_versions SET state = 'superseded'
        WHERE dataset_id = p_output AND lot = p_lot AND state = 'current';
    END IF;
    -- One statement: the transition, the new version, the run's output pointing at it, and
    -- claims.announce: on success the lot's consumers may take it, on failure the job itself.
    WITH transition AS (
        INSERT INTO run_transitions (run_id, state, transitioned_at, recorded_at)
        VALUES (p_run, target, p_at, p_now)),
    version AS (
        INSERT INTO dataset_versions (id, dataset_id, version_number, lot, run_id, state, fields,
                                      created_at)
        SELECT p_version, p_output, number, p_lot, p_run,
               CASE WHEN p_success THEN 'current' ELSE 'failed' END,
               coalesce((SELECT jsonb_agg(jsonb_build_object('name', f.name, 'type', f.type,
                                                             'description', f.description)
                                          ORDER BY f.position)
                         FROM dataset_fields f WHERE f.dataset_id = p_output), '[]'::jsonb),
               p_now),
    linked AS (
        UPDATE run_outputs SET dataset_version_id = p_version
        WHERE run_id = p_run AND dataset_id = p_output AND lot = p_lot)
    INSERT INTO lot_frontier (job_id, lot, touched_at)
    SELECT c.job_id, p_lot, p_now FROM lot_job_inputs c WHERE p_success AND c.dataset_id = p_output
    UNION ALL
    SELECT p_job, p_lot, p_now
    WHERE NOT p_success AND EXISTS (SELECT 1 FROM lot_job_inputs c WHERE c.job_id = p_job)
    ORDER BY 1
    ON CONFLICT (job_id, lot) DO UPDATE SET touched_at = excluded.touched_at;
END $$
"""


def upgrade() -> None:
    op.create_table(
        "dataset_version_counters",
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("last_version_number", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_dataset_version_counters_dataset_id_datasets")
        ),
        sa.PrimaryKeyConstraint("dataset_id", name=op.f("pk_dataset_version_counters")),
    )
    op.execute(
        "INSERT INTO dataset_version_counters (dataset_id, last_version_number) "
        "SELECT id, last_version_number FROM datasets WHERE last_version_number > 0"
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(CLAIM_NEXT_LOT)
        op.execute(FINISH_CLAIM)  # before the column goes: 0006's function refers to it
    op.drop_column("datasets", "last_version_number")


def downgrade() -> None:
    op.add_column(
        "datasets",
        sa.Column("last_version_number", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    op.execute(
        "UPDATE datasets SET last_version_number = (SELECT c.last_version_number "
        "FROM dataset_version_counters c WHERE c.dataset_id = datasets.id) "
        "WHERE id IN (SELECT dataset_id FROM dataset_version_counters)"
    )
    if op.get_bind().dialect.name == "postgresql":
        for definition in _definitions_of_0006():
            op.execute(definition)
    op.drop_table("dataset_version_counters")


def _definitions_of_0006() -> list[str]:
    """0006's functions, read from its own file, so that a downgrade restores exactly them."""
    spec = importlib.util.spec_from_file_location(
        "lotline_migration_0006", Path(__file__).with_name("0006_claim_functions.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [
        str(sql).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
        for sql in (module.CLAIM_NEXT_LOT, module.FINISH_CLAIM)
    ]
