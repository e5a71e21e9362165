package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// BudgetRecord is a stored budget definition. Package budgets gives it
// meaning.
type BudgetRecord struct {
	Name string
	// Kind is requests, tokens or cost.
	Kind string
	// Limit is a count of requests or tokens, or micro-USD.
	Limit int64
	// Window is the budget's window as the user wrote it: a duration such
	// as 24h or 7d (rolling) or hour, day, week, month (calendar, UTC).
	Window    string
	CreatedAt time.Time
}

func listBudgets(ctx context.Context, q querier) ([]BudgetRecord, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, kind, limit_value, window, created_ms FROM budgets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list budgets: %w", err)
	}
	defer rows.Close()
	var out []BudgetRecord
	for rows.Next() {
		var b BudgetRecord
		var ms int64
		if err := rows.Scan(&b.Name, &b.Kind, &b.Limit, &b.Window, &ms); err != nil {
			return nil, fmt.Errorf("list budgets: %w", err)
		}
		b.CreatedAt = time.UnixMilli(ms).UTC()
		out = append(out, b)
	}
	return out, rows.Err()
}

// Budgets lists the budget definitions by name.
func (s *Store) Budgets(ctx context.Context) ([]BudgetRecord, error) {
	return listBudgets(ctx, s.db)
}

func bumpConfig(ctx context.Context, q execQuerier) error {
	_, err := q.ExecContext(ctx, `UPDATE meta SET value = value + 1 WHERE key = 'config_version'`)
	return err
}

// PutBudget adds a budget. With replace, a budget of the same name is
// replaced in the same transaction; without it, an existing name is
// ErrExists and nothing changes.
func (s *Store) PutBudget(ctx context.Context, b BudgetRecord, replace bool) error {
	if b.CreatedAt.IsZero() {
		b.CreatedAt = s.clk.Now()
	}
	return s.execConfig(ctx, func(ctx context.Context, q execQuerier) error {
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM budgets WHERE name = ?`, b.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 && !replace {
			return refuse(fmt.Errorf("budget %q: %w", b.Name, ErrExists))
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO budgets (name, kind, limit_value, window, created_ms) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, limit_value = excluded.limit_value, window = excluded.window, created_ms = excluded.created_ms`,
			b.Name, b.Kind, b.Limit, b.Window, b.CreatedAt.UnixMilli()); err != nil {
			return err
		}
		return bumpConfig(ctx, q)
	})
}

// RemoveBudget deletes a budget; ErrNotFound when there is none.
func (s *Store) RemoveBudget(ctx context.Context, name string) error {
	return s.execConfig(ctx, func(ctx context.Context, q execQuerier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM budgets WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return refuse(fmt.Errorf("budget %q: %w", name, ErrNotFound))
		}
		return bumpConfig(ctx, q)
	})
}

func isConstraint(err error) bool {
	var coder interface{ Code() int }
	if errors.As(err, &coder) {
		return coder.Code()&0xff == 19 // SQLITE_CONSTRAINT
	}
	return false
}
