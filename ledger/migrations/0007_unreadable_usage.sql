-- 0007: unreadable usage.
-- set_aside counts the usage rows whose usage could not be read (a value
-- outside 0..10^12, or not an integer, written by an older rotor): the fold
-- made their usage unknown instead of failing on them.
INSERT INTO meta (key, value) VALUES ('set_aside', 0);
-- The report rollup counts the rows of unknown input and output tokens, as
-- it counts those of unknown total tokens, so that a report prints such a
-- sum as unknown instead of the sum of the known rows. A row of unknown
-- total tokens has, nearly always, unknown input and output too; the rows
-- still in usage are counted exactly.
ALTER TABLE usage_hour_dims ADD COLUMN input_null INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_hour_dims ADD COLUMN output_null INTEGER NOT NULL DEFAULT 0;
UPDATE usage_hour_dims SET input_null = tokens_null, output_null = tokens_null;
UPDATE usage_hour_dims SET input_null = x.i, output_null = x.o FROM (
  SELECT ts_ms / 3600000 AS bucket, operation, model, credential, client, status,
    COUNT(*) - COUNT(input_tokens) AS i, COUNT(*) - COUNT(output_tokens) AS o
  FROM usage WHERE state = 1 AND ts_ms < (SELECT value FROM meta WHERE key = 'fold_until')
  GROUP BY 1, 2, 3, 4, 5, 6
) AS x
WHERE usage_hour_dims.bucket = x.bucket AND usage_hour_dims.operation = x.operation AND usage_hour_dims.model = x.model
  AND usage_hour_dims.credential = x.credential AND usage_hour_dims.client = x.client AND usage_hour_dims.status = x.status;
