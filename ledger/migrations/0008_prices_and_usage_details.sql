-- 0008: prices and the usage details of the OpenAI routes.
-- cached_input_tokens and reasoning_tokens are NULL when the provider did
-- not report them. The report rollup sums them, counting the rows where
-- they are unknown, as it does for input and output.
ALTER TABLE usage ADD COLUMN cached_input_tokens INTEGER;
ALTER TABLE usage ADD COLUMN reasoning_tokens INTEGER;
ALTER TABLE usage_hour_dims ADD COLUMN cached_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_hour_dims ADD COLUMN cached_null INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_hour_dims ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_hour_dims ADD COLUMN reasoning_null INTEGER NOT NULL DEFAULT 0;
-- Every row folded so far is a Decisions row, which reports neither.
UPDATE usage_hour_dims SET cached_null = requests, reasoning_null = requests;

-- Prices, micro-USD per 1M tokens, by the model as sent upstream. They
-- change config_version like budgets, so a running runtime takes them at
-- its next admission. cached_input_micros NULL: cached input costs as
-- input. source is 'set' or the name of the imported file.
CREATE TABLE prices (
  model               TEXT    PRIMARY KEY,
  input_micros        INTEGER NOT NULL CHECK (input_micros >= 0),
  cached_input_micros INTEGER CHECK (cached_input_micros >= 0),
  output_micros       INTEGER NOT NULL CHECK (output_micros >= 0),
  source              TEXT    NOT NULL,
  updated_ms          INTEGER NOT NULL
) WITHOUT ROWID;
