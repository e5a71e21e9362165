-- 0001: rotor's ledger on PostgreSQL. Times are UTC unix milliseconds; money
-- is integer micro-USD; NULL means unknown and is never read as zero.

-- schema_version is the number of the last migration applied;
-- config_version (the change counter) moves with every change to budgets,
-- client tokens or prices, so that admission reloads them only then.
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value BIGINT NOT NULL
);
INSERT INTO meta (key, value) VALUES ('schema_version', 0), ('config_version', 1);

-- One row per request that sent at least one inference call: a reservation
-- (state 0, status 0) written at admission, settled (state 1) when the
-- request ends. The columns are SQLite's.
CREATE TABLE usage (
  request_id          TEXT     PRIMARY KEY,
  ts_ms               BIGINT   NOT NULL,
  state               SMALLINT NOT NULL DEFAULT 0,
  expires_ms          BIGINT   NOT NULL,
  operation           TEXT     NOT NULL,
  pool                TEXT     NOT NULL DEFAULT '',
  model               TEXT     NOT NULL DEFAULT '',
  credential          TEXT     NOT NULL DEFAULT '',
  region              TEXT     NOT NULL DEFAULT '',
  client              TEXT     NOT NULL DEFAULT '',
  attempts            INTEGER  NOT NULL DEFAULT 0,
  status              INTEGER  NOT NULL DEFAULT 0,
  error_code          TEXT     NOT NULL DEFAULT '',
  input_tokens        BIGINT,
  output_tokens       BIGINT,
  total_tokens        BIGINT,
  cost_micros         BIGINT,
  latency_ms          BIGINT,
  cached_input_tokens BIGINT,
  reasoning_tokens    BIGINT
);
-- Raw edges of windows and reports, Rows, Reach and NewestUnknownCost.
CREATE INDEX usage_ts ON usage (ts_ms);
-- InFlight: the open reservations of a window.
CREATE INDEX usage_open ON usage (ts_ms) WHERE state = 0;

-- Totals of every row (open or settled) per minute, hour and UTC day,
-- updated in the transaction of the batch that writes the rows: a window is
-- whole days, whole hours, whole minutes and two raw edges.
CREATE TABLE usage_minute (
  bucket      BIGINT PRIMARY KEY,
  requests    BIGINT NOT NULL,
  tokens      BIGINT NOT NULL,
  tokens_null BIGINT NOT NULL,
  cost_micros BIGINT NOT NULL,
  cost_null   BIGINT NOT NULL
);
CREATE TABLE usage_hour (LIKE usage_minute INCLUDING ALL);
CREATE TABLE usage_day (LIKE usage_minute INCLUDING ALL);

-- Hourly totals of every row by the report's group keys (an open
-- reservation is in status 0 with every value unknown).
CREATE TABLE usage_hour_dims (
  bucket              BIGINT NOT NULL,
  operation           TEXT   NOT NULL,
  model               TEXT   NOT NULL,
  credential          TEXT   NOT NULL,
  client              TEXT   NOT NULL,
  status              INTEGER NOT NULL,
  requests            BIGINT NOT NULL,
  input_tokens        BIGINT NOT NULL,
  output_tokens       BIGINT NOT NULL,
  total_tokens        BIGINT NOT NULL,
  tokens_null         BIGINT NOT NULL,
  cost_micros         BIGINT NOT NULL,
  cost_null           BIGINT NOT NULL,
  errors              BIGINT NOT NULL,
  input_null          BIGINT NOT NULL,
  output_null         BIGINT NOT NULL,
  cached_input_tokens BIGINT NOT NULL,
  cached_null         BIGINT NOT NULL,
  reasoning_tokens    BIGINT NOT NULL,
  reasoning_null      BIGINT NOT NULL,
  PRIMARY KEY (bucket, operation, model, credential, client, status)
);

CREATE TABLE budgets (
  name        TEXT   PRIMARY KEY,
  kind        TEXT   NOT NULL CHECK (kind IN ('requests', 'tokens', 'cost')),
  limit_value BIGINT NOT NULL CHECK (limit_value > 0),
  "window"    TEXT   NOT NULL,
  created_ms  BIGINT NOT NULL
);

-- Client tokens of the bridge, stored only as SHA-256 hashes.
CREATE TABLE client_tokens (
  label        TEXT   PRIMARY KEY,
  hash         BYTEA  NOT NULL UNIQUE,
  created_ms   BIGINT NOT NULL,
  last_used_ms BIGINT
);

-- Prices, micro-USD per 1M tokens; cached_input_micros NULL: cached input
-- costs as input.
CREATE TABLE prices (
  model               TEXT   PRIMARY KEY,
  input_micros        BIGINT NOT NULL CHECK (input_micros >= 0),
  cached_input_micros BIGINT CHECK (cached_input_micros >= 0),
  output_micros       BIGINT NOT NULL CHECK (output_micros >= 0),
  source              TEXT   NOT NULL,
  updated_ms          BIGINT NOT NULL
);

-- Learned cooldown state: an opaque identity digest and an opaque state.
CREATE TABLE learned_cooldown (
  id         TEXT   PRIMARY KEY,
  state      BYTEA  NOT NULL,
  revision   BIGINT NOT NULL CHECK (revision > 0),
  created_ms BIGINT NOT NULL,
  expires_ms BIGINT NOT NULL
);
CREATE INDEX learned_cooldown_expires ON learned_cooldown (expires_ms);
