CREATE FUNCTION lotline_claim_next_lot(
    p_job uuid, p_stamp timestamptz, p_version uuid, p_output uuid, p_inputs uuid[],
    p_owner text, p_run uuid, p_lease interval,
    OUT claimed_lot text, OUT claimed_attempt integer, OUT started_at timestamptz,
    OUT lease_expires_at timestamptz, OUT claimed_failures integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    batch integer := 1;
    hints text[];
    hint_failures integer[];
    k integer;
    eligible text[];
    eligible_failures integer[];
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
        -- The job's next hints that are due (claims.next_candidate / frontier.pop with a guard): none
        -- unless the job is not held and its registration and current version are what the caller
        -- cached. A retry hint is not due before its back-off has run out.
        WITH picked AS MATERIALIZED (
            SELECT f.lot FROM lot_frontier f
            WHERE f.job_id = p_job AND (f.not_before IS NULL OR f.not_before <= clock_timestamp())
              AND EXISTS (
                SELECT 1 FROM lot_jobs lj JOIN jobs j ON j.id = lj.job_id
                WHERE lj.job_id = p_job AND NOT lj.held AND lj.updated_at = p_stamp
                  AND j.current_version_id IS NOT DISTINCT FROM p_version)
            ORDER BY f.lot LIMIT batch FOR UPDATE OF f SKIP LOCKED),
        taken AS (
            DELETE FROM lot_frontier f
            WHERE f.job_id = p_job AND f.lot = ANY (ARRAY(SELECT lot FROM picked))
            RETURNING f.lot, f.failures)
        SELECT array_agg(lot ORDER BY lot), array_agg(failures ORDER BY lot)
          INTO hints, hint_failures FROM taken;
        IF hints IS NULL THEN
            RETURN;
        END IF;
        -- SPEC §4 eligible: the job's output absent, ERROR or RESUBMIT; every input READY; no
        -- INPUT row of the job RUNNING or DONE on it. One read per hint: the rows of the lot that
        -- matter (primary-key lookups), counted by kind.
        FOR k IN 1 .. cardinality(hints) LOOP
            SELECT count(*) FILTER (WHERE r.dataset_id = p_output AND r.role = 'OUTPUT'
                                      AND r.status NOT IN ('ERROR', 'RESUBMIT')),
                   count(*) FILTER (WHERE r.dataset_id = ANY (p_inputs) AND r.role = 'OUTPUT'
                                      AND r.status = 'READY'),
                   count(*) FILTER (WHERE r.dataset_id = ANY (p_inputs) AND r.job_id = p_job
                                      AND r.role = 'INPUT' AND r.status IN ('RUNNING', 'DONE')),
                   coalesce(max(r.attempt) FILTER (WHERE r.dataset_id = p_output AND r.role = 'OUTPUT'), 0)
              INTO blocked, ready, locked, last_attempt
              FROM data_status r
             WHERE r.dataset_id = ANY (p_inputs || p_output) AND r.lot = hints[k];
            CONTINUE WHEN blocked > 0 OR ready < cardinality(p_inputs) OR locked > 0;
            IF eligible IS NULL THEN
                claimed_attempt := last_attempt + 1;
            END IF;
            eligible := eligible || hints[k];
            eligible_failures := eligible_failures || hint_failures[k];
        END LOOP;
        EXIT WHEN eligible IS NOT NULL;
        IF cardinality(hints) < batch THEN
            RETURN;
        END IF;
        batch := least(2 * batch, 256);
    END LOOP;
    claimed_lot := eligible[1];
    claimed_failures := eligible_failures[1];
    -- The run starts now, after the check, by the database's clock (as its end will be): an earlier
    -- attempt that the check saw ended and committed before, so run intervals never overlap.
    p_now := clock_timestamp();
    started_at := p_now;
    lease_expires_at := p_now + p_lease;
    -- Eligible lots not chosen get their hint back (due, with their count of failures in a row).
    IF cardinality(eligible) > 1 THEN
        INSERT INTO lot_frontier (job_id, lot, touched_at, not_before, failures)
        SELECT p_job, e.lot, p_now, NULL, e.failures
        FROM unnest(eligible[2:], eligible_failures[2:]) AS e(lot, failures) ORDER BY e.lot
        ON CONFLICT (job_id, lot) DO UPDATE SET touched_at = excluded.touched_at,
            not_before = excluded.not_before, failures = excluded.failures;
    END IF;

    -- The lot's rows locked without waiting (migration 0022): this call holds the hints it took.
    PERFORM 1 FROM data_status r
     WHERE r.job_id = p_job AND r.lot = claimed_lot AND r.dataset_id = ANY (p_inputs || p_output)
       FOR UPDATE NOWAIT;

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
END $$;
