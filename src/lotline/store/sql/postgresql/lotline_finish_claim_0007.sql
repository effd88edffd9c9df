CREATE FUNCTION lotline_finish_claim_0007(
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
END $$;
