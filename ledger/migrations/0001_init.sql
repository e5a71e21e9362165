-- 0001: usage rows, their rollups, budgets, client tokens.
-- Times are UTC unix milliseconds; money is integer micro-USD; NULL means
-- unknown and is never read as zero.

CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
-- config_version is bumped by every change to budgets or client tokens, so
-- a running runtime or bridge reloads them only when they changed.
INSERT INTO meta (key, value) VALUES ('config_version', 1);

-- One row per request that sent at least one inference call. A row starts
-- as a reservation (state 0) written at admission and is settled (state 1)
-- when the request ends. status 0 means "not settled".
CREATE TABLE usage (
  id            INTEGER PRIMARY KEY,
  request_id    TEXT    NOT NULL UNIQUE,
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
  latency_ms    INTEGER
);
CREATE INDEX usage_ts ON usage (ts_ms);
CREATE INDEX usage_open ON usage (expires_ms) WHERE state = 0;

-- Totals per minute and per hour over all rows, kept on every write, so a
-- budget window is whole buckets plus the raw rows of its partial edges.
CREATE TABLE usage_minute (
  bucket        INTEGER PRIMARY KEY,
  requests      INTEGER NOT NULL,
  tokens        INTEGER NOT NULL,
  tokens_null   INTEGER NOT NULL,
  cost_micros   INTEGER NOT NULL,
  cost_null     INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE usage_hour (
  bucket        INTEGER PRIMARY KEY,
  requests      INTEGER NOT NULL,
  tokens        INTEGER NOT NULL,
  tokens_null   INTEGER NOT NULL,
  cost_micros   INTEGER NOT NULL,
  cost_null     INTEGER NOT NULL
) WITHOUT ROWID;

-- Hourly totals by the report's group keys.
CREATE TABLE usage_hour_dims (
  bucket        INTEGER NOT NULL,
  operation     TEXT    NOT NULL,
  model         TEXT    NOT NULL,
  credential    TEXT    NOT NULL,
  client        TEXT    NOT NULL,
  status        INTEGER NOT NULL,
  requests      INTEGER NOT NULL,
  input_tokens  INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  total_tokens  INTEGER NOT NULL,
  tokens_null   INTEGER NOT NULL,
  cost_micros   INTEGER NOT NULL,
  cost_null     INTEGER NOT NULL,
  errors        INTEGER NOT NULL,
  PRIMARY KEY (bucket, operation, model, credential, client, status)
) WITHOUT ROWID;

CREATE TABLE budgets (
  name        TEXT    PRIMARY KEY,
  kind        TEXT    NOT NULL CHECK (kind IN ('requests', 'tokens', 'cost')),
  limit_value INTEGER NOT NULL CHECK (limit_value > 0),
  window      TEXT    NOT NULL,
  created_ms  INTEGER NOT NULL
) WITHOUT ROWID;

-- Client tokens of the bridge, stored only as SHA-256 hashes.
CREATE TABLE client_tokens (
  label        TEXT    PRIMARY KEY,
  hash         BLOB    NOT NULL UNIQUE,
  created_ms   INTEGER NOT NULL,
  last_used_ms INTEGER
) WITHOUT ROWID;
