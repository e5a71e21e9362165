package ledger

// What `rotor ledger copy` needs of a SQLite ledger, in either direction:
// the learned records to read, and rows and learned records to write as
// they are (ledger.Importer).

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

var _ Importer = (*Store)(nil)

// ImportRows writes the rows whose request id is not stored yet at their
// time, as they are, in one transaction, and counts the rows written
// behind the fold frontier in the rollups (rows after it are folded as
// any). It returns how many it added.
func (s *Store) ImportRows(ctx context.Context, rows []Row) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	added := 0
	err := s.exec(ctx, func(ctx context.Context, q execQuerier) error {
		added = 0
		for _, sql := range []string{createImportIDs, clearImportIDs} {
			if _, err := q.ExecContext(ctx, sql); err != nil {
				return err
			}
		}
		foldUntil, hourUntil, err := frontiers(ctx, q)
		if err != nil {
			return err
		}
		lo, hi := int64(1<<62), int64(-1<<62)
		for _, r := range rows {
			if r.RequestID == "" {
				return refuse(fmt.Errorf("import: a row without request id"))
			}
			ts := r.Time.UnixMilli()
			var n int
			if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM usage WHERE ts_ms = ? AND request_id = ?`, ts, r.RequestID).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			state := 0
			if r.Settled {
				state = 1
			}
			if _, err := q.ExecContext(ctx, `INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, pool, model, credential, region, client,
  attempts, status, error_code, input_tokens, output_tokens, total_tokens, cost_micros, latency_ms, cached_input_tokens, reasoning_tokens)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				r.RequestID, ts, state, r.Expires.UnixMilli(), r.Operation, r.Pool, r.Model, r.Credential, r.Region, r.Client,
				r.Attempts, r.Status, r.ErrorCode, nullable(r.InputTokens), nullable(r.OutputTokens), nullable(r.TotalTokens),
				nullable(r.CostMicros), r.Latency.Milliseconds(), nullable(r.CachedInputTokens), nullable(r.ReasoningTokens)); err != nil {
				return err
			}
			if _, err := q.ExecContext(ctx, `INSERT OR IGNORE INTO temp.import_ids (request_id) VALUES (?)`, r.RequestID); err != nil {
				return err
			}
			lo, hi = min(lo, ts), max(hi, ts)
			added++
		}
		if added > 0 && lo < foldUntil {
			if err := foldImported(ctx, q, lo, hi, foldUntil, hourUntil); err != nil {
				return err
			}
		}
		if added > 0 {
			// Runs in the writer: its cached windows summed the old rows.
			s.w.windows.reset()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("import rows: %w", err)
	}
	return added, nil
}

func nullable(c Count) any {
	if !c.Known {
		return nil
	}
	return c.V
}

// LearnedRecords returns every stored learned-cooldown record, live or not
// yet reclaimed, by id.
func (s *Store) LearnedRecords(ctx context.Context) ([]LearnedRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, state, revision, created_ms, expires_ms FROM learned_cooldown ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("learned records: %w", err)
	}
	defer rows.Close()
	var out []LearnedRecord
	for rows.Next() {
		var r LearnedRecord
		var created, expires int64
		if err := rows.Scan(&r.ID, &r.State, &r.Revision, &created, &expires); err != nil {
			return nil, fmt.Errorf("learned records: %w", err)
		}
		r.CreatedAt, r.ExpiresAt = time.UnixMilli(created).UTC(), time.UnixMilli(expires).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// ImportLearned writes the records whose id is not stored yet, and
// returns how many it added. It keeps PutLearned's bounds at now: expired
// rows are reclaimed first, a record already expired is skipped, none is
// added past capacity live records, and none lives past its creation plus
// retention.
func (s *Store) ImportLearned(ctx context.Context, recs []LearnedRecord, now time.Time, capacity int, retention time.Duration) (int, error) {
	added := 0
	err := s.exec(ctx, func(ctx context.Context, q execQuerier) error {
		added = 0
		nowMS := now.UnixMilli()
		if _, err := q.ExecContext(ctx, `DELETE FROM learned_cooldown WHERE expires_ms <= ?`, nowMS); err != nil {
			return err
		}
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM learned_cooldown`).Scan(&n); err != nil {
			return err
		}
		for _, r := range recs {
			if ex := r.CreatedAt.Add(retention); r.ExpiresAt.After(ex) {
				r.ExpiresAt = ex
			}
			if n >= capacity || r.ExpiresAt.UnixMilli() <= nowMS {
				continue // full, or expired: what PutLearned would refuse
			}
			res, err := q.ExecContext(ctx, `INSERT INTO learned_cooldown (id, state, revision, created_ms, expires_ms) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING`, r.ID, r.State, max(r.Revision, 1), r.CreatedAt.UnixMilli(), r.ExpiresAt.UnixMilli())
			if err != nil {
				return err
			}
			if k, _ := res.RowsAffected(); k > 0 {
				added++
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("import learned state: %w", err)
	}
	return added, nil
}

// ImportClientTokens writes the tokens whose label is not stored yet, as
// they are (hash, creation and last use), and returns how many it added.
func (s *Store) ImportClientTokens(ctx context.Context, toks []ClientToken) (int, error) {
	return s.importNew(ctx, "tokens", len(toks), func(ctx context.Context, q execQuerier, i int) (sql.Result, error) {
		t := toks[i]
		return q.ExecContext(ctx, `INSERT INTO client_tokens (label, hash, created_ms, last_used_ms) VALUES (?, ?, ?, ?)
ON CONFLICT (label) DO NOTHING`, t.Label, t.Hash[:], t.CreatedAt.UnixMilli(), t.LastUsedMS())
	})
}

// ImportPrices writes the prices whose model has none stored yet, as they
// are (source and update time), and returns how many it added.
func (s *Store) ImportPrices(ctx context.Context, ps []Price) (int, error) {
	if err := ValidatePrices(ps); err != nil {
		return 0, err
	}
	now := s.clk.Now()
	return s.importNew(ctx, "prices", len(ps), func(ctx context.Context, q execQuerier, i int) (sql.Result, error) {
		p := ps[i]
		if p.Updated.IsZero() {
			p.Updated = now
		}
		return q.ExecContext(ctx, `INSERT INTO prices (model, input_micros, cached_input_micros, output_micros, source, updated_ms) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (model) DO NOTHING`, p.Model, p.InputMicros, p.CachedInputMicros.arg(), p.OutputMicros, p.Source, p.Updated.UnixMilli())
	})
}

// importNew runs insert for items 0 to n-1 in one configuration
// transaction, each an insert that does nothing where the item is stored
// already, and returns how many it added; the configuration's generation
// moves only when one was.
func (s *Store) importNew(ctx context.Context, what string, n int, insert func(ctx context.Context, q execQuerier, i int) (sql.Result, error)) (int, error) {
	added := 0
	err := s.execConfig(ctx, func(ctx context.Context, q execQuerier) error {
		added = 0
		for i := range n {
			res, err := insert(ctx, q, i)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				added++
			}
		}
		if added == 0 {
			return nil
		}
		return bumpConfig(ctx, q)
	})
	if err != nil {
		return 0, fmt.Errorf("import %s: %w", what, err)
	}
	return added, nil
}

// SchemaVersion returns the schema version of the open database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}
