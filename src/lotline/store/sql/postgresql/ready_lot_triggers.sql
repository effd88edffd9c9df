CREATE TRIGGER data_status_ready_inserted AFTER INSERT ON data_status REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION lotline_count_ready_lots();
ALTER TABLE data_status ENABLE ALWAYS TRIGGER data_status_ready_inserted;

CREATE TRIGGER data_status_ready_updated AFTER UPDATE ON data_status REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION lotline_count_ready_lots();
ALTER TABLE data_status ENABLE ALWAYS TRIGGER data_status_ready_updated;

CREATE TRIGGER data_status_ready_deleted AFTER DELETE ON data_status REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION lotline_count_ready_lots();
ALTER TABLE data_status ENABLE ALWAYS TRIGGER data_status_ready_deleted;
