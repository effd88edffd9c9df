"""claim functions: a worker's claim of the next lot and the end of its claim, one call each (PostgreSQL)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22

The common path of a worker (claim the next lot of a job without a lot mapping; complete or fail
that claim) costs about twenty statements in Python. On PostgreSQL these two functions do the same
writes in one call each, run in autocommit: no round trip per statement and no lock held while a
client process waits to be scheduled. They follow the Python path exactly (``coordination/claims.py``,
``services/recording.py``); whatever they do not cover they refuse before writing anything the
caller keeps — they raise, the statement rolls back, and the caller takes the Python path:

- ``LT001`` fall back: an input without a current version (rule 1 is Python's), or a claim whose
  run is not a plain RUNNING run with exactly the claimed output to version;
- ``LT002`` lost race: another worker took a row of the lot between the check and the write;
- ``LT003`` not live: the claim is no longer this owner's live attempt (fenced completion).

``tests/contract/test_claim_functions.py`` replays one history through both paths and compares
every row they write. SQLite has no stored functions; there the Python path is the only one.
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

CLAIM_NEXT_LOT = """
CREATE FUNCTION lotline_claim_next_lot(
    p_job uuid, p_stamp timestamptz, p_version uuid, p_output uuid, p_inputs uuid[],
    p_owner text, p_run uuid, p_lease interval,
    OUT claimed_lot text, OUT claimed_attempt integer, OUT started_at timestamptz,
    OUT lease_expires_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    batch integer := 1;
    hints text[];
    hint text;
    eligible text[];
    wanted integer := 1 + cardinality(p_inputs);
    written integer;
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
            DELETE FROM lot_frontier f USING picked
            WHERE f.job_id = p_job AND f.lot = picked.lot RETURNING f.lot)
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
    INSERT INTO lot_frontier (job_id, lot, touched_at)
    SELECT p_job, e.lot, p_now FROM unnest(eligible[2:]) AS e(lot) ORDER BY e.lot
    ON CONFLICT (job_id, lot) DO UPDATE SET touched_at = excluded.touched_at;

    -- recording.create_started_run: the run, its NEW and RUNNING transitions, its inputs and
    -- outputs with those its job version declares (at the run's lot), inputs pinned to current.
    INSERT INTO runs (id, job_id, job_version_id, lot, state, started_at, args, facets,
                      created_at, updated_at)
    VALUES (p_run, p_job, p_version, claimed_lot, 'RUNNING', p_now, '{}', '{}', p_now, p_now);
    INSERT INTO run_transitions (run_id, state, transitioned_at, recorded_at)
    VALUES (p_run, 'NEW', p_now, p_now), (p_run, 'RUNNING', p_now, p_now);
    INSERT INTO run_inputs (run_id, dataset_id, lot, dataset_version_id, recorded_at)
    SELECT p_run, d.id, claimed_lot,
           (SELECT v.id FROM dataset_versions v
            WHERE v.dataset_id = d.id AND v.lot = claimed_lot AND v.state = 'current'),
           p_now
    FROM (SELECT unnest(p_inputs)
          UNION SELECT io.dataset_id FROM job_version_io io
                WHERE io.job_version_id = p_version AND io.role = 'INPUT') AS d(id)
    ORDER BY d.id;
    GET DIAGNOSTICS written = ROW_COUNT;
    IF written <> (SELECT count(*) FROM run_inputs
                   WHERE run_id = p_run AND dataset_version_id IS NOT NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'LT001',
            MESSAGE = 'lotline: an input of lot ' || claimed_lot || ' has no current version';
    END IF;
    INSERT INTO run_outputs (run_id, dataset_id, lot, recorded_at)
    SELECT p_run, d.id, claimed_lot, p_now
    FROM (SELECT p_output
          UNION SELECT io.dataset_id FROM job_version_io io
                WHERE io.job_version_id = p_version AND io.role = 'OUTPUT') AS d(id)
    ORDER BY d.id;

    -- data_status.take_claim: OUTPUT RUNNING and the INPUT RUNNING read locks, each written only
    -- if still takeable (the mutex); any row not written means another worker won the lot.
    WITH claim(dataset_id, role) AS (
        SELECT p_output, 'OUTPUT' UNION ALL SELECT i, 'INPUT' FROM unnest(p_inputs) AS i),
    taken AS (
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
    SELECT count(*) INTO written FROM taken;
    IF written <> wanted THEN
        RAISE EXCEPTION USING ERRCODE = 'LT002',
            MESSAGE = 'lotline: lot ' || claimed_lot || ' was just claimed by another worker';
    END IF;
END $$
"""

FINISH_CLAIM = """
CREATE FUNCTION lotline_finish_claim(
    p_job uuid, p_run uuid, p_owner text, p_attempt integer, p_success boolean,
    p_at timestamptz, p_output uuid, p_lot text, p_version uuid)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    live boolean;
    target text := CASE WHEN p_success THEN 'COMPLETED' ELSE 'FAILED' END;
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
    -- recording.apply_transition: RUNNING -> COMPLETED / FAILED, outputs versioned (rules 3, 4, 7).
    IF (SELECT state FROM runs WHERE id = p_run FOR UPDATE) IS DISTINCT FROM 'RUNNING'
       OR (SELECT array_agg(dataset_id::text || ' ' || lot) FROM run_outputs
           WHERE run_id = p_run AND dataset_version_id IS NULL)
          IS DISTINCT FROM ARRAY[p_output::text || ' ' || p_lot] THEN
        RAISE EXCEPTION USING ERRCODE = 'LT001',
            MESSAGE = 'lotline: run ' || p_run || ' is not a plain claim run';
    END IF;
    UPDATE runs SET state = target, ended_at = p_at, updated_at = p_now WHERE id = p_run;
    INSERT INTO run_transitions (run_id, state, transitioned_at, recorded_at)
    VALUES (p_run, target, p_at, p_now);
    UPDATE datasets SET last_version_number = last_version_number + 1 WHERE id = p_output
    RETURNING last_version_number INTO number;
    IF p_success THEN
        UPDATE dataset_versions SET state = 'superseded'
        WHERE dataset_id = p_output AND lot = p_lot AND state = 'current';
    END IF;
    INSERT INTO dataset_versions (id, dataset_id, version_number, lot, run_id, state, fields, created_at)
    SELECT p_version, p_output, number, p_lot, p_run, CASE WHEN p_success THEN 'current' ELSE 'failed' END,
           coalesce((SELECT jsonb_agg(jsonb_build_object('name', f.name, 'type', f.type,
                                                         'description', f.description)
                                      ORDER BY f.position)
                     FROM dataset_fields f WHERE f.dataset_id = p_output), '[]'::jsonb),
           p_now;
    UPDATE run_outputs SET dataset_version_id = p_version
    WHERE run_id = p_run AND dataset_id = p_output AND lot = p_lot;
    -- claims.announce: on success the lot's consumers may take it, on failure the job itself.
    IF p_success THEN
        INSERT INTO lot_frontier (job_id, lot, touched_at)
        SELECT c.job_id, p_lot, p_now FROM lot_job_inputs c WHERE c.dataset_id = p_output
        ORDER BY c.job_id
        ON CONFLICT (job_id, lot) DO UPDATE SET touched_at = excluded.touched_at;
    ELSE
        INSERT INTO lot_frontier (job_id, lot, touched_at)
        SELECT p_job, p_lot, p_now WHERE EXISTS (SELECT 1 FROM lot_job_inputs c WHERE c.job_id = p_job)
        ON CONFLICT (job_id, lot) DO UPDATE SET touched_at = excluded.touched_at;
    END IF;
END $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(CLAIM_NEXT_LOT)
        op.execute(FINISH_CLAIM)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION lotline_finish_claim")
        op.execute("DROP FUNCTION lotline_claim_next_lot")
