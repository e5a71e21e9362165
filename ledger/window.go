package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Window is a half-open time range [From, To).
type Window struct {
	From, To time.Time
}

func (w Window) ms() (int64, int64) { return w.From.UnixMilli(), w.To.UnixMilli() }

// Totals aggregates the usage rows of a window. Unknown values are counted,
// never summed as zero.
type Totals struct {
	// Requests counts rows: settled usage and open reservations.
	Requests int64
	// Tokens sums the known total tokens.
	Tokens int64
	// TokensUnknown counts rows whose tokens are unknown (open
	// reservations, unreadable answers).
	TokensUnknown int64
	// CostMicros sums the known cost in micro-USD.
	CostMicros int64
	// CostUnknown counts rows whose cost is unknown.
	CostUnknown int64
}

// add adds d, saturating (see SumCap).
func (t *Totals) add(d Totals) {
	t.Requests = satAdd(t.Requests, d.Requests)
	t.Tokens = satAdd(t.Tokens, d.Tokens)
	t.TokensUnknown = satAdd(t.TokensUnknown, d.TokensUnknown)
	t.CostMicros = satAdd(t.CostMicros, d.CostMicros)
	t.CostUnknown = satAdd(t.CostUnknown, d.CostUnknown)
}

func (t Totals) neg() Totals {
	return Totals{-t.Requests, -t.Tokens, -t.TokensUnknown, -t.CostMicros, -t.CostUnknown}
}

// Measure names what a budget counts.
type Measure int

const (
	MeasureRequests Measure = iota
	MeasureTokens
	MeasureCost
)

// WindowReader answers questions about usage windows inside one consistent
// view of the ledger: the writer's transaction during admission, or a read
// transaction for `budget list`.
type WindowReader interface {
	// Now is the time of the view.
	Now() time.Time
	// Budgets returns the budget definitions.
	Budgets() []BudgetRecord
	// Totals aggregates the rows of w.
	Totals(w Window) (Totals, error)
	// Reach returns the time of the earliest row in w at which the
	// cumulative measure, counted from w.From, reaches need; ok=false when
	// the window holds less than need.
	Reach(w Window, m Measure, need int64) (at time.Time, ok bool, err error)
	// NewestUnknownCost returns the time of the newest row of unknown cost
	// in w; ok=false when there is none.
	NewestUnknownCost(w Window) (at time.Time, ok bool, err error)
}

// querier is the part of *sql.Conn that views use.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// dbError marks an error from the database inside a view, so the writer
// can tell it from an admission refusal.
type dbError struct{ err error }

func (e *dbError) Error() string { return e.err.Error() }
func (e *dbError) Unwrap() error { return e.err }

// view implements WindowReader over one connection in a transaction.
type view struct {
	ctx     context.Context
	q       querier
	now     time.Time
	budgets []BudgetRecord
	// cache holds windows already computed in this view; the writer keeps
	// them exact by applying each later write's delta (see applyDelta).
	cache map[[2]int64]Totals
	// flush, when set, writes pending rollup deltas before a query reads
	// the rollup tables.
	flush func() error
	// wc, in the writer's views, carries window totals from batch to
	// batch.
	wc *windowCache
	// hourUntil is the hour rollup's frontier: hours before it are read
	// from usage_hour, later ones from usage_minute (migration 0005). A
	// frontier older than the database's is still exact.
	hourUntil int64
	// foldUntil is the minute rollup's frontier (unix ms, migration
	// 0006): rows from it on are read raw. It must be the database's.
	foldUntil int64
}

func (v *view) Now() time.Time          { return v.now }
func (v *view) Budgets() []BudgetRecord { return v.budgets }

func (v *view) prepare() error {
	if v.flush != nil {
		if err := v.flush(); err != nil {
			return &dbError{err}
		}
	}
	return nil
}

// The window queries read usage values through sqlReadable and sum them
// with sqlSum, so that no row can make a window fail.
var (
	qRawTotals = `SELECT COUNT(*), ` + sqlSum(sqlReadable("total_tokens")) + `, COUNT(*)-COUNT(` + sqlReadable("total_tokens") + `), ` +
		sqlSum(sqlReadable("cost_micros")) + `, COUNT(*)-COUNT(` + sqlReadable("cost_micros") + `) FROM usage WHERE ts_ms >= ? AND ts_ms < ?`
	rollupTotals  = sqlSum("requests") + `, ` + sqlSum("tokens") + `, ` + sqlSum("tokens_null") + `, ` + sqlSum("cost_micros") + `, ` + sqlSum("cost_null")
	qMinuteTotals = `SELECT ` + rollupTotals + ` FROM usage_minute WHERE bucket >= ? AND bucket < ?`
	qHourTotals   = `SELECT ` + rollupTotals + ` FROM usage_hour WHERE bucket >= ? AND bucket < ?`
)

func (v *view) segTotals(s segment) (Totals, error) {
	if s.kind == segRaw {
		return v.rawTotals(s.lo, s.hi)
	}
	q, unit := qMinuteTotals, minuteMS
	if s.kind == segHour {
		q, unit = qHourTotals, hourMS
	}
	return v.totalsQuery(q, s.lo/unit, s.hi/unit)
}

func (v *view) totalsQuery(q string, lo, hi int64) (Totals, error) {
	var t Totals
	err := v.q.QueryRowContext(v.ctx, q, lo, hi).Scan(&t.Requests, &t.Tokens, &t.TokensUnknown, &t.CostMicros, &t.CostUnknown)
	if err != nil {
		return t, &dbError{fmt.Errorf("window totals: %w", err)}
	}
	return t, nil
}

func (v *view) Totals(w Window) (Totals, error) {
	f, t := w.ms()
	if v.wc != nil && t == v.now.UnixMilli()+1 {
		return v.cachedTotals(f, t)
	}
	return v.exactTotals(f, t)
}

// exactTotals computes [f, t) from the rollups and raw edges.
func (v *view) exactTotals(f, t int64) (Totals, error) {
	key := [2]int64{f, t}
	if got, ok := v.cache[key]; ok {
		return got, nil
	}
	if err := v.prepare(); err != nil {
		return Totals{}, err
	}
	var sum Totals
	for _, s := range segments(f, t, v.hourUntil, v.foldUntil) {
		st, err := v.segTotals(s)
		if err != nil {
			return Totals{}, err
		}
		sum.add(st)
	}
	if v.cache != nil {
		v.cache[key] = sum
	}
	return sum, nil
}

func measureOf(t Totals, m Measure) int64 {
	switch m {
	case MeasureTokens:
		return t.Tokens
	case MeasureCost:
		return t.CostMicros
	}
	return t.Requests
}

var (
	measureRollupCol = map[Measure]string{MeasureRequests: "requests", MeasureTokens: "tokens", MeasureCost: "cost_micros"}
	measureRawExpr   = map[Measure]string{MeasureRequests: "1", MeasureTokens: "COALESCE(" + sqlReadable("total_tokens") + ",0)", MeasureCost: "COALESCE(" + sqlReadable("cost_micros") + ",0)"}
)

func (v *view) Reach(w Window, m Measure, need int64) (time.Time, bool, error) {
	if need <= 0 {
		return w.From, true, nil
	}
	if err := v.prepare(); err != nil {
		return time.Time{}, false, err
	}
	f, t := w.ms()
	cum := int64(0)
	for _, s := range segments(f, t, v.hourUntil, v.foldUntil) {
		at, ok, err := v.reachIn(s, m, need, &cum)
		if err != nil || ok {
			return at, ok, err
		}
	}
	return time.Time{}, false, nil
}

// reachIn walks segment s in time order adding the measure to *cum and
// returns the row time at which *cum reaches need.
func (v *view) reachIn(s segment, m Measure, need int64, cum *int64) (time.Time, bool, error) {
	if s.kind == segRaw {
		rows, err := v.q.QueryContext(v.ctx, `SELECT ts_ms, `+measureRawExpr[m]+` FROM usage WHERE ts_ms >= ? AND ts_ms < ? ORDER BY ts_ms`, s.lo, s.hi)
		if err != nil {
			return time.Time{}, false, &dbError{err}
		}
		defer rows.Close()
		for rows.Next() {
			var ts, x int64
			if err := rows.Scan(&ts, &x); err != nil {
				return time.Time{}, false, &dbError{err}
			}
			*cum = satAdd(*cum, x)
			if *cum >= need {
				return time.UnixMilli(ts).UTC(), true, nil
			}
		}
		if err := rows.Err(); err != nil {
			return time.Time{}, false, &dbError{err}
		}
		return time.Time{}, false, nil
	}
	st, err := v.segTotals(s)
	if err != nil {
		return time.Time{}, false, err
	}
	if satAdd(*cum, measureOf(st, m)) < need {
		*cum = satAdd(*cum, measureOf(st, m))
		return time.Time{}, false, nil
	}
	table, unit, sub := "usage_minute", minuteMS, segRaw
	if s.kind == segHour {
		table, unit, sub = "usage_hour", hourMS, segMinute
	}
	col := measureRollupCol[m]
	rows, err := v.q.QueryContext(v.ctx, `SELECT bucket, `+sqlClamp(col)+` FROM `+table+` WHERE bucket >= ? AND bucket < ? AND `+col+` > 0 ORDER BY bucket`, s.lo/unit, s.hi/unit)
	if err != nil {
		return time.Time{}, false, &dbError{err}
	}
	type bucket struct{ b, x int64 }
	var bs []bucket
	for rows.Next() {
		var b bucket
		if err := rows.Scan(&b.b, &b.x); err != nil {
			rows.Close()
			return time.Time{}, false, &dbError{err}
		}
		bs = append(bs, b)
	}
	rows.Close()
	for _, b := range bs {
		if satAdd(*cum, b.x) >= need {
			return v.reachIn(segment{sub, b.b * unit, (b.b + 1) * unit}, m, need, cum)
		}
		*cum = satAdd(*cum, b.x)
	}
	return time.Time{}, false, nil
}

func (v *view) NewestUnknownCost(w Window) (time.Time, bool, error) {
	if err := v.prepare(); err != nil {
		return time.Time{}, false, err
	}
	f, t := w.ms()
	segs := segments(f, t, v.hourUntil, v.foldUntil)
	for i := len(segs) - 1; i >= 0; i-- {
		at, ok, err := v.newestUnknownIn(segs[i])
		if err != nil || ok {
			return at, ok, err
		}
	}
	return time.Time{}, false, nil
}

func (v *view) newestUnknownIn(s segment) (time.Time, bool, error) {
	switch s.kind {
	case segRaw:
		// Walks the time index back from hi and stops at the first match.
		var ts int64
		err := v.q.QueryRowContext(v.ctx, `SELECT ts_ms FROM usage WHERE ts_ms >= ? AND ts_ms < ? AND `+sqlReadable("cost_micros")+` IS NULL ORDER BY ts_ms DESC LIMIT 1`, s.lo, s.hi).Scan(&ts)
		if errors.Is(err, sql.ErrNoRows) {
			return time.Time{}, false, nil
		}
		if err != nil {
			return time.Time{}, false, &dbError{err}
		}
		return time.UnixMilli(ts).UTC(), true, nil
	default:
		table, unit, sub := "usage_minute", minuteMS, segRaw
		if s.kind == segHour {
			table, unit, sub = "usage_hour", hourMS, segMinute
		}
		var b sql.NullInt64
		err := v.q.QueryRowContext(v.ctx, `SELECT MAX(bucket) FROM `+table+` WHERE bucket >= ? AND bucket < ? AND cost_null > 0`, s.lo/unit, s.hi/unit).Scan(&b)
		if err != nil {
			return time.Time{}, false, &dbError{err}
		}
		if !b.Valid {
			return time.Time{}, false, nil
		}
		return v.newestUnknownIn(segment{sub, b.Int64 * unit, (b.Int64 + 1) * unit})
	}
}

// View runs fn on a consistent read-only view of the ledger at the current
// time, for reports such as `budget list`.
func (s *Store) View(ctx context.Context, fn func(WindowReader) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("ledger view: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN DEFERRED"); err != nil {
		return fmt.Errorf("ledger view: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	budgets, err := listBudgets(ctx, conn)
	if err != nil {
		return err
	}
	v := &view{ctx: ctx, q: conn, now: s.clk.Now(), budgets: budgets}
	if err := conn.QueryRowContext(ctx, qHourUntil).Scan(&v.hourUntil); err != nil {
		return fmt.Errorf("ledger view: %w", err)
	}
	if err := conn.QueryRowContext(ctx, qFoldUntil).Scan(&v.foldUntil); err != nil {
		return fmt.Errorf("ledger view: %w", err)
	}
	return fn(v)
}
