-- 0009: the partial index of open reservations, again (0003 dropped it
-- when nothing read it). A cost budget's admission counts the requests
-- in flight in its window (InFlight) whenever the window holds a
-- reservation this process did not open: another bridge's request, or one
-- a crash or a failed settlement left. Without the index that count walked
-- every row of the window under the write lock, and a month's budget over
-- 100k rows cut one bridge from ~16,800 requests in 5 s to ~160. It costs
-- a page write per reservation and settlement. PostgreSQL has had it all
-- along (usage_open).
CREATE INDEX IF NOT EXISTS usage_open ON usage (ts_ms) WHERE state = 0;
