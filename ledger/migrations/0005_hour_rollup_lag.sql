-- 0005: the hour rollup is written a full hour behind. Hours before
-- hour_rollup_until (an hour number, ms / 3600000) have exact rows in
-- usage_hour; later hours (the current one and the one before) are read
-- from usage_minute, so a request no longer writes an hour row on the way.
-- Every hour row written so far is exact, so all of them count as written.
INSERT INTO meta (key, value) SELECT 'hour_rollup_until', COALESCE(MAX(bucket) + 1, 0) FROM usage_hour;
