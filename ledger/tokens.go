package ledger

import (
	"context"
	"fmt"
	"time"
)

// ClientToken is a bridge client token as stored: its label, times and
// SHA-256 hash (what `rotor ledger copy` moves), never the token.
type ClientToken struct {
	Label     string
	CreatedAt time.Time
	LastUsed  time.Time // zero when never used
	Hash      [32]byte
}

// LastUsedMS is the token's last use in Unix ms as stored, or nil when it
// was never used.
func (t ClientToken) LastUsedMS() *int64 {
	if t.LastUsed.IsZero() {
		return nil
	}
	ms := t.LastUsed.UnixMilli()
	return &ms
}

// AddClientToken stores the hash of a new client token under label. With
// replace, an existing label gets the new hash; without it, ErrExists.
func (s *Store) AddClientToken(ctx context.Context, label string, hash [32]byte, replace bool) error {
	now := s.clk.Now().UnixMilli()
	return s.execConfig(ctx, func(ctx context.Context, q execQuerier) error {
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM client_tokens WHERE label = ?`, label).Scan(&n); err != nil {
			return err
		}
		if n > 0 && !replace {
			return refuse(fmt.Errorf("token %q: %w", label, ErrExists))
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO client_tokens (label, hash, created_ms) VALUES (?, ?, ?)
ON CONFLICT (label) DO UPDATE SET hash = excluded.hash, created_ms = excluded.created_ms, last_used_ms = NULL`, label, hash[:], now); err != nil {
			return err
		}
		return bumpConfig(ctx, q)
	})
}

// RevokeClientToken deletes the token stored under label; ErrNotFound when
// there is none.
func (s *Store) RevokeClientToken(ctx context.Context, label string) error {
	return s.execConfig(ctx, func(ctx context.Context, q execQuerier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM client_tokens WHERE label = ?`, label)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return refuse(fmt.Errorf("token %q: %w", label, ErrNotFound))
		}
		return bumpConfig(ctx, q)
	})
}

// ClientTokens lists the stored tokens by label.
func (s *Store) ClientTokens(ctx context.Context) ([]ClientToken, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT label, created_ms, last_used_ms, hash FROM client_tokens ORDER BY label`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []ClientToken
	for rows.Next() {
		var t ClientToken
		var created int64
		var last *int64
		var hash []byte
		if err := rows.Scan(&t.Label, &created, &last, &hash); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		copy(t.Hash[:], hash)
		t.CreatedAt = time.UnixMilli(created).UTC()
		if last != nil {
			t.LastUsed = time.UnixMilli(*last).UTC()
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// LookupToken returns the label of the token whose SHA-256 is hash. It
// answers from memory and reloads the token table only when PRAGMA
// data_version and then config_version say that it changed, so a token
// revoked by another process stops working at its next use without a table
// read per request.
func (s *Store) LookupToken(ctx context.Context, hash [32]byte) (string, bool, error) {
	w := s.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.refresh(ctx); err != nil {
		return "", false, err
	}
	label, ok := w.tokens[hash]
	return label, ok, nil
}

func (w *watcher) refresh(context.Context) error {
	// A context that cannot be cancelled keeps the driver from starting a
	// watcher per statement; both statements are single-page reads.
	ctx := context.Background()
	if w.conn == nil {
		c, err := w.s.db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		dv, err := c.PrepareContext(ctx, "PRAGMA data_version")
		if err != nil {
			c.Close()
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		cv, err := c.PrepareContext(ctx, "SELECT value FROM meta WHERE key = 'config_version'")
		if err != nil {
			dv.Close()
			c.Close()
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		w.conn, w.dataVerStmt, w.cfgVerStmt = c, dv, cv
		w.loaded = false
	}
	var dv int64
	if err := w.dataVerStmt.QueryRowContext(ctx).Scan(&dv); err != nil {
		w.close()
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if w.loaded && dv == w.dataVer {
		return nil
	}
	var cv int64
	if err := w.cfgVerStmt.QueryRowContext(ctx).Scan(&cv); err != nil {
		w.close()
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	w.dataVer = dv
	if w.loaded && cv == w.cfgVer {
		return nil
	}
	m, err := loadTokens(ctx, w.conn)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	w.tokens, w.cfgVer, w.loaded = m, cv, true
	w.s.tokens.Store(&m)
	return nil
}

// loadTokens reads the client token table: hash -> label.
func loadTokens(ctx context.Context, q querier) (map[[32]byte]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT label, hash FROM client_tokens`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return ScanTokens(rows)
}

// LookupTokenCached answers from the token list last loaded by this
// process, and falls back to LookupToken when the token is not in it (a
// token created by another process since). It may still accept a token
// revoked a moment ago: use it only where admission re-checks the token
// (Reservation.CheckToken), which it does inside the same transaction that
// sees the revocation.
func (s *Store) LookupTokenCached(ctx context.Context, hash [32]byte) (string, bool, error) {
	if m := s.tokens.Load(); m != nil {
		if label, ok := (*m)[hash]; ok {
			return label, true, nil
		}
	}
	return s.LookupToken(ctx, hash)
}

// TouchTokens records when tokens were last used. The bridge coalesces uses
// in memory and calls this now and then, off the request path.
func (s *Store) TouchTokens(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	return s.w.submit(nil, &op{kind: opTouch, touch: used})
}
