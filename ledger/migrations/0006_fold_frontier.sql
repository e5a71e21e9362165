-- 0006: requests no longer write the minute and report rollups. A row
-- written at or after fold_until (unix ms) is in no rollup yet: windows and
-- reports read it raw, and the writer folds such rows into usage_minute and
-- usage_hour_dims in chunks, moving fold_until forward. A reservation,
-- settlement or release of a row before fold_until updates the rollups
-- itself. Every row written so far is in the rollups.
INSERT INTO meta (key, value) SELECT 'fold_until', COALESCE(MAX(ts_ms) + 1, 0) FROM usage;
