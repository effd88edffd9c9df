CREATE FUNCTION lotline_finish_claim(
    p_job uuid, p_run uuid, p_owner text, p_attempt integer, p_success boolean,
    p_at timestamptz, p_output uuid, p_lot text, p_version uuid)
RETURNS void
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    PERFORM lotline_finish_claim_0007(p_job, p_run, p_owner, p_attempt, p_success, p_at, p_output,
                                      p_lot, p_version);
    IF p_success THEN
        UPDATE lot_frontier SET not_before = NULL, failures = 0
        WHERE lot = p_lot AND not_before IS NOT NULL
          AND job_id IN (SELECT c.job_id FROM lot_job_inputs c WHERE c.dataset_id = p_output);
        PERFORM pg_advisory_xact_lock(7810735312196363877);
        INSERT INTO lot_events (dataset_id, lot, kind, manifest_id, version_id, run_id, created_at)
        VALUES (p_output, p_lot, 'READY', NULL, p_version, p_run, clock_timestamp());
        PERFORM pg_notify('lotline_lots', '');
    END IF;
END $$;
