-- 0003: drop the partial index of open reservations. Nothing reads it, and
-- it cost a page write on every reservation and settlement.
DROP INDEX IF EXISTS usage_open;
