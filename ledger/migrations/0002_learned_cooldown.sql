-- 0002: learned cooldown state (spec/learned-cooldown.md, the private
-- storage domain). Rows hold only an opaque identity digest and an opaque
-- encoded state: no key, prefix, model or quota bucket name.
CREATE TABLE learned_cooldown (
  id         TEXT    PRIMARY KEY,
  state      BLOB    NOT NULL,
  revision   INTEGER NOT NULL CHECK (revision > 0),
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX learned_cooldown_expires ON learned_cooldown (expires_ms);
