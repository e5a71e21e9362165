-- 0007: set_aside counts the usage rows whose usage could not be read
-- (a value outside 0..10^12, or not an integer, written by an older rotor):
-- the fold made their usage unknown instead of failing on them.
INSERT INTO meta (key, value) VALUES ('set_aside', 0);
