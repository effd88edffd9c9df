CREATE TRIGGER data_status_ready_inserted AFTER INSERT ON data_status WHEN NEW.role = 'OUTPUT' AND NEW.status = 'READY' BEGIN INSERT INTO ready_lot_counts (dataset_id, lot_prefix, job_id, lots) VALUES (NEW.dataset_id, substr(NEW.lot, 1, length(NEW.lot) - 1), NEW.job_id, 1); END;

CREATE TRIGGER data_status_ready_deleted AFTER DELETE ON data_status WHEN OLD.role = 'OUTPUT' AND OLD.status = 'READY' BEGIN INSERT INTO ready_lot_counts (dataset_id, lot_prefix, job_id, lots) VALUES (OLD.dataset_id, substr(OLD.lot, 1, length(OLD.lot) - 1), OLD.job_id, -1); END;

CREATE TRIGGER data_status_ready_left AFTER UPDATE OF dataset_id, lot, job_id, role, status ON data_status WHEN OLD.role = 'OUTPUT' AND OLD.status = 'READY' BEGIN INSERT INTO ready_lot_counts (dataset_id, lot_prefix, job_id, lots) VALUES (OLD.dataset_id, substr(OLD.lot, 1, length(OLD.lot) - 1), OLD.job_id, -1); END;

CREATE TRIGGER data_status_ready_entered AFTER UPDATE OF dataset_id, lot, job_id, role, status ON data_status WHEN NEW.role = 'OUTPUT' AND NEW.status = 'READY' BEGIN INSERT INTO ready_lot_counts (dataset_id, lot_prefix, job_id, lots) VALUES (NEW.dataset_id, substr(NEW.lot, 1, length(NEW.lot) - 1), NEW.job_id, 1); END;
