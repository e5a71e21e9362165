-- 0004: store usage rows clustered by time. The primary key (ts_ms,
-- request_id) serves every time range the ledger reads and locates a row
-- to settle, so neither a rowid nor separate indexes on ts_ms and
-- request_id are kept: a reservation now writes one usage page instead of
-- three. The hourly report rollup holds settled rows only; reports find the
-- few unsettled ones from the hours whose totals exceed it.
CREATE TABLE usage_new (
  request_id    TEXT    NOT NULL,
  ts_ms         INTEGER NOT NULL,
  state         INTEGER NOT NULL DEFAULT 0,
  expires_ms    INTEGER NOT NULL,
  operation     TEXT    NOT NULL,
  pool          TEXT    NOT NULL DEFAULT '',
  model         TEXT    NOT NULL DEFAULT '',
  credential    TEXT    NOT NULL DEFAULT '',
  region        TEXT    NOT NULL DEFAULT '',
  client        TEXT    NOT NULL DEFAULT '',
  attempts      INTEGER NOT NULL DEFAULT 0,
  status        INTEGER NOT NULL DEFAULT 0,
  error_code    TEXT    NOT NULL DEFAULT '',
  input_tokens  INTEGER,
  output_tokens INTEGER,
  total_tokens  INTEGER,
  cost_micros   INTEGER,
  latency_ms    INTEGER,
  PRIMARY KEY (ts_ms, request_id)
) WITHOUT ROWID;
INSERT INTO usage_new (request_id, ts_ms, state, expires_ms, operation, pool, model, credential, region, client, attempts, status, error_code,
  input_tokens, output_tokens, total_tokens, cost_micros, latency_ms)
SELECT request_id, ts_ms, state, expires_ms, operation, pool, model, credential, region, client, attempts, status, error_code,
  input_tokens, output_tokens, total_tokens, cost_micros, latency_ms FROM usage;
DROP TABLE usage;
ALTER TABLE usage_new RENAME TO usage;
DELETE FROM usage_hour_dims WHERE status = 0;
