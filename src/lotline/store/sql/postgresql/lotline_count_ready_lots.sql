CREATE FUNCTION lotline_count_ready_lots() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ready_lot_counts (dataset_id, lot_prefix, job_id, lots)
        SELECT dataset_id, left(lot, -1), job_id, count(*) FROM new_rows
        WHERE role = 'OUTPUT' AND status = 'READY'
        GROUP BY 1, 2, 3;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO ready_lot_counts (dataset_id, lot_prefix, job_id, lots)
        SELECT dataset_id, left(lot, -1), job_id, -count(*) FROM old_rows
        WHERE role = 'OUTPUT' AND status = 'READY'
        GROUP BY 1, 2, 3;
    ELSE
        INSERT INTO ready_lot_counts (dataset_id, lot_prefix, job_id, lots)
        SELECT dataset_id, lot_prefix, job_id, sum(change) FROM (
            SELECT dataset_id, left(lot, -1) AS lot_prefix, job_id, 1 AS change FROM new_rows
            WHERE role = 'OUTPUT' AND status = 'READY'
            UNION ALL
            SELECT dataset_id, left(lot, -1), job_id, -1 FROM old_rows
            WHERE role = 'OUTPUT' AND status = 'READY') AS changes
        GROUP BY 1, 2, 3 HAVING sum(change) <> 0;
    END IF;
    RETURN NULL;
END $$;
