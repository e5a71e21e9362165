package pgledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rotorhq/rotor/ledger"
)

// Budgets, client tokens and prices. Every change commits with a bump of
// the change counter (meta.config_version), which admission reads in its
// batch transaction: a change binds every process at its next admission.

const bumpConfig = `UPDATE meta SET value = value + 1 WHERE key = 'config_version'`

// refusal is an error a config change returns before writing anything.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// change runs fn in a transaction and commits it with a bump of the
// change counter. A refusal from fn is returned as is.
func (s *Store) change(ctx context.Context, what string, bump bool, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	ctx, cancel := readCtx(ctx)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.wrap(what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(ctx, tx); err != nil {
		var r *refusal
		if errors.As(err, &r) {
			return r.err
		}
		return s.wrap(what, err)
	}
	if bump {
		if _, err := tx.Exec(ctx, bumpConfig); err != nil {
			return s.wrap(what, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return s.wrap(what, err)
	}
	return nil
}

func listBudgets(ctx context.Context, q querier) ([]ledger.BudgetRecord, error) {
	rows, err := q.Query(ctx, `SELECT name, kind, limit_value, "window", created_ms FROM budgets ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ledger.BudgetRecord
	for rows.Next() {
		var b ledger.BudgetRecord
		var ms int64
		if err := rows.Scan(&b.Name, &b.Kind, &b.Limit, &b.Window, &ms); err != nil {
			return nil, err
		}
		b.CreatedAt = time.UnixMilli(ms).UTC()
		out = append(out, b)
	}
	return out, rows.Err()
}

// Budgets lists the budget definitions by name.
func (s *Store) Budgets(ctx context.Context) ([]ledger.BudgetRecord, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := readCtx(ctx)
	defer cancel()
	bs, err := listBudgets(ctx, s.pool)
	if err != nil {
		return nil, s.wrap("list budgets", err)
	}
	return bs, nil
}

// PutBudget adds a budget; with replace, one of the same name is replaced,
// without it an existing name is ErrExists and nothing changes.
func (s *Store) PutBudget(ctx context.Context, b ledger.BudgetRecord, replace bool) error {
	var created any = s.nowArg()
	if !b.CreatedAt.IsZero() {
		created = b.CreatedAt.UnixMilli()
	}
	return s.change(ctx, "put budget", true, func(ctx context.Context, tx pgx.Tx) error {
		q := `INSERT INTO budgets (name, kind, limit_value, "window", created_ms) VALUES ($1, $2, $3, $4, COALESCE($5::bigint, ` + msNow + `))
ON CONFLICT (name) DO `
		if replace {
			q += `UPDATE SET kind = excluded.kind, limit_value = excluded.limit_value, "window" = excluded."window", created_ms = excluded.created_ms`
		} else {
			q += `NOTHING`
		}
		tag, err := tx.Exec(ctx, q, b.Name, b.Kind, b.Limit, b.Window, created)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return &refusal{fmt.Errorf("budget %q: %w", b.Name, ledger.ErrExists)}
		}
		return nil
	})
}

// RemoveBudget deletes a budget; ErrNotFound when there is none.
func (s *Store) RemoveBudget(ctx context.Context, name string) error {
	return s.change(ctx, "remove budget", true, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM budgets WHERE name = $1`, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return &refusal{fmt.Errorf("budget %q: %w", name, ledger.ErrNotFound)}
		}
		return nil
	})
}

// AddClientToken stores the hash of a new client token under label; with
// replace, an existing label gets the new hash, without it ErrExists.
func (s *Store) AddClientToken(ctx context.Context, label string, hash [32]byte, replace bool) error {
	return s.change(ctx, "add token", true, func(ctx context.Context, tx pgx.Tx) error {
		q := `INSERT INTO client_tokens (label, hash, created_ms) VALUES ($1, $2, COALESCE($3::bigint, ` + msNow + `)) ON CONFLICT (label) DO `
		if replace {
			q += `UPDATE SET hash = excluded.hash, created_ms = excluded.created_ms, last_used_ms = NULL`
		} else {
			q += `NOTHING`
		}
		tag, err := tx.Exec(ctx, q, label, hash[:], s.nowArg())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return &refusal{fmt.Errorf("token %q: %w", label, ledger.ErrExists)}
		}
		return nil
	})
}

// ImportClientTokens writes the tokens whose label is not stored yet, as
// they are (hash, creation and last use), and returns how many it added.
func (s *Store) ImportClientTokens(ctx context.Context, toks []ledger.ClientToken) (int, error) {
	return s.importNew(ctx, "import tokens", len(toks), func(ctx context.Context, tx pgx.Tx, i int) (pgconn.CommandTag, error) {
		t := toks[i]
		return tx.Exec(ctx, `INSERT INTO client_tokens (label, hash, created_ms, last_used_ms) VALUES ($1, $2, $3, $4) ON CONFLICT (label) DO NOTHING`,
			t.Label, t.Hash[:], t.CreatedAt.UnixMilli(), t.LastUsedMS())
	})
}

// ImportPrices writes the prices whose model has none stored yet, as they
// are (source and update time), and returns how many it added.
func (s *Store) ImportPrices(ctx context.Context, ps []ledger.Price) (int, error) {
	if err := ledger.ValidatePrices(ps); err != nil {
		return 0, err
	}
	return s.importNew(ctx, "import prices", len(ps), func(ctx context.Context, tx pgx.Tx, i int) (pgconn.CommandTag, error) {
		p := ps[i]
		return tx.Exec(ctx, `INSERT INTO prices (model, input_micros, cached_input_micros, output_micros, source, updated_ms) VALUES ($1, $2, $3, $4, $5, COALESCE($6::bigint, `+msNow+`))
ON CONFLICT (model) DO NOTHING`, p.Model, p.InputMicros, arg(p.CachedInputMicros), p.OutputMicros, p.Source, s.updatedArg(p))
	})
}

// importNew runs insert for items 0 to n-1 in one change, each an insert
// that does nothing where the item is stored already, and returns how
// many it added.
func (s *Store) importNew(ctx context.Context, what string, n int, insert func(ctx context.Context, tx pgx.Tx, i int) (pgconn.CommandTag, error)) (int, error) {
	added := 0
	err := s.change(ctx, what, true, func(ctx context.Context, tx pgx.Tx) error {
		added = 0
		for i := range n {
			tag, err := insert(ctx, tx, i)
			if err != nil {
				return err
			}
			added += int(tag.RowsAffected())
		}
		return nil
	})
	return added, err
}

// updatedArg is a price's update time as stored, or the database's now
// (COALESCE) when it has none.
func (s *Store) updatedArg(p ledger.Price) any {
	if p.Updated.IsZero() {
		return s.nowArg()
	}
	return p.Updated.UnixMilli()
}

// RevokeClientToken deletes the token stored under label; ErrNotFound when
// there is none.
func (s *Store) RevokeClientToken(ctx context.Context, label string) error {
	return s.change(ctx, "revoke token", true, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM client_tokens WHERE label = $1`, label)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return &refusal{fmt.Errorf("token %q: %w", label, ledger.ErrNotFound)}
		}
		return nil
	})
}

// ClientTokens lists the stored tokens by label.
func (s *Store) ClientTokens(ctx context.Context) ([]ledger.ClientToken, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := readCtx(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT label, hash, created_ms, last_used_ms FROM client_tokens ORDER BY label`)
	if err != nil {
		return nil, s.wrap("list tokens", err)
	}
	defer rows.Close()
	var out []ledger.ClientToken
	for rows.Next() {
		var t ledger.ClientToken
		var h []byte
		var created int64
		var last *int64
		if err := rows.Scan(&t.Label, &h, &created, &last); err != nil {
			return nil, s.wrap("list tokens", err)
		}
		t.CreatedAt = time.UnixMilli(created).UTC()
		if last != nil {
			t.LastUsed = time.UnixMilli(*last).UTC()
		}
		copy(t.Hash[:], h)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list tokens", err)
	}
	return out, nil
}

func loadTokens(ctx context.Context, q querier) (map[[32]byte]string, error) {
	rows, err := q.Query(ctx, `SELECT label, hash FROM client_tokens`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return ledger.ScanTokens(rows)
}

// LookupToken returns the label of the token whose SHA-256 is hash. It
// reads the change counter and reloads the token list only when it moved.
func (s *Store) LookupToken(ctx context.Context, hash [32]byte) (string, bool, error) {
	if err := s.checkOpen(); err != nil {
		return "", false, err
	}
	ctx, cancel := readCtx(ctx)
	defer cancel()
	s.tokMu.Lock()
	defer s.tokMu.Unlock()
	var cv int64
	if err := s.pool.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'config_version'`).Scan(&cv); err != nil {
		return "", false, s.wrap("look up token", err)
	}
	m := s.tokens.Load()
	if m == nil || cv != s.tokVer {
		toks, err := loadTokens(ctx, s.pool)
		if err != nil {
			return "", false, s.wrap("look up token", err)
		}
		m, s.tokVer = &toks, cv
		s.tokens.Store(m)
	}
	label, ok := (*m)[hash]
	return label, ok, nil
}

// LookupTokenCached answers from the list last loaded, and falls back to
// LookupToken for a token not in it. Admission re-checks the token
// (Reservation.CheckToken) in its own transaction.
func (s *Store) LookupTokenCached(ctx context.Context, hash [32]byte) (string, bool, error) {
	if m := s.tokens.Load(); m != nil {
		if label, ok := (*m)[hash]; ok {
			return label, true, nil
		}
	}
	return s.LookupToken(ctx, hash)
}

// TouchTokens records when tokens were last used.
func (s *Store) TouchTokens(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	return s.change(ctx, "touch tokens", false, func(ctx context.Context, tx pgx.Tx) error {
		for label, t := range used {
			if _, err := tx.Exec(ctx, `UPDATE client_tokens SET last_used_ms = GREATEST(COALESCE(last_used_ms, 0), $1) WHERE label = $2`, t.UnixMilli(), label); err != nil {
				return err
			}
		}
		return nil
	})
}

const selectPrices = `SELECT model, input_micros, cached_input_micros, output_micros, source, updated_ms FROM prices`

func listPrices(ctx context.Context, q querier) (map[string]ledger.Price, error) {
	rows, err := q.Query(ctx, selectPrices)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]ledger.Price{}
	for rows.Next() {
		var p ledger.Price
		var cached *int64
		var ms int64
		if err := rows.Scan(&p.Model, &p.InputMicros, &cached, &p.OutputMicros, &p.Source, &ms); err != nil {
			return nil, err
		}
		p.CachedInputMicros, p.Updated = ledger.CountOf(cached), time.UnixMilli(ms).UTC()
		out[p.Model] = p
	}
	return out, rows.Err()
}

// Prices lists the stored prices by model.
func (s *Store) Prices(ctx context.Context) (map[string]ledger.Price, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := readCtx(ctx)
	defer cancel()
	ps, err := listPrices(ctx, s.pool)
	if err != nil {
		return nil, s.wrap("list prices", err)
	}
	return ps, nil
}

// PutPrices stores prices in one transaction and returns how many it
// wrote. A price whose stored source is SourceSet is kept (not counted)
// unless replace, or unless the new price is itself SourceSet.
func (s *Store) PutPrices(ctx context.Context, ps []ledger.Price, replace bool) (int, error) {
	if err := ledger.ValidatePrices(ps); err != nil {
		return 0, err
	}
	wrote := 0
	err := s.change(ctx, "put prices", true, func(ctx context.Context, tx pgx.Tx) error {
		wrote = 0
		for _, p := range ps {
			q := `INSERT INTO prices AS p (model, input_micros, cached_input_micros, output_micros, source, updated_ms) VALUES ($1, $2, $3, $4, $5, COALESCE($6::bigint, ` + msNow + `))
ON CONFLICT (model) DO UPDATE SET input_micros = excluded.input_micros, cached_input_micros = excluded.cached_input_micros,
  output_micros = excluded.output_micros, source = excluded.source, updated_ms = excluded.updated_ms`
			if !replace && p.Source != ledger.SourceSet {
				q += ` WHERE p.source <> '` + ledger.SourceSet + `'`
			}
			tag, err := tx.Exec(ctx, q, p.Model, p.InputMicros, arg(p.CachedInputMicros), p.OutputMicros, p.Source, s.updatedArg(p))
			if err != nil {
				return err
			}
			wrote += int(tag.RowsAffected())
		}
		return nil
	})
	return wrote, err
}

// RemovePrice deletes a model's price; ErrNotFound when there is none.
func (s *Store) RemovePrice(ctx context.Context, model string) error {
	return s.change(ctx, "remove price", true, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM prices WHERE model = $1`, model)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return &refusal{fmt.Errorf("price of %q: %w", model, ledger.ErrNotFound)}
		}
		return nil
	})
}
