package ledger

import (
	"context"
	"database/sql"
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

// Add adds d, saturating (see SumCap).
func (t *Totals) Add(d Totals) {
	t.Requests = SatAdd(t.Requests, d.Requests)
	t.Tokens = SatAdd(t.Tokens, d.Tokens)
	t.TokensUnknown = SatAdd(t.TokensUnknown, d.TokensUnknown)
	t.CostMicros = SatAdd(t.CostMicros, d.CostMicros)
	t.CostUnknown = SatAdd(t.CostUnknown, d.CostUnknown)
}

func (t Totals) Neg() Totals {
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
	// in w, requests in flight (see InFlight) left out: the time a cost
	// budget failing closed frees depends on it; ok=false when there is
	// none.
	NewestUnknownCost(w Window) (at time.Time, ok bool, err error)
	// InFlight counts, up to upTo, the open reservations in w still
	// within their deadline plus grace (and younger than MaxInFlight):
	// requests in flight, which Totals counts as rows of unknown tokens
	// and cost but a cost budget does not (DESIGN, Prices and cost).
	InFlight(w Window, upTo int64) (int64, error)
}

// MaxInFlight bounds how long an open reservation counts as in flight,
// whatever its deadline: an older one is usage of unknown cost.
const MaxInFlight = 24 * time.Hour

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
	// prunedUntil is the prune frontier (unix ms, prune.go): rows
	// before it may be gone, only the rollups describe that time.
	prunedUntil int64
	// open, in the writer's views, counts the in-flight reservations
	// this process wrote in [f, t) at now, so that a lone process need
	// not read them back.
	open func(f, t, now int64) int64
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

// through returns w's bounds in ms; a window that ends now (To = now+1ms,
// as every budget's does) also holds the rows stamped after now: a clock
// stepped back, or another process's clock ahead, must not hide usage
// already written from a budget.
func (v *view) through(w Window) (int64, int64) {
	f, t := w.ms()
	if t == v.now.UnixMilli()+1 {
		t = endOfTime
	}
	return f, t
}

// endOfTime is past every row's time (ms).
const endOfTime = int64(1) << 60

func (v *view) Totals(w Window) (Totals, error) {
	f, t := v.through(w)
	// A window starting in pruned time is not slid by the cache: the rows
	// that leave it are gone, only the rollups count them (prune.go).
	if v.wc != nil && t == endOfTime && f >= v.prunedTo() {
		return v.cachedTotals(f, t)
	}
	return v.exactTotals(f, t)
}

func (v *view) Reach(w Window, m Measure, need int64) (time.Time, bool, error) {
	if need <= 0 {
		return w.From, true, nil
	}
	if err := v.prepare(); err != nil {
		return time.Time{}, false, err
	}
	f, t := v.through(w)
	cum := int64(0)
	for _, s := range v.segs(f, t) {
		at, ok, err := v.reachIn(s, m, need, &cum)
		if err != nil || ok {
			return at, ok, err
		}
	}
	return time.Time{}, false, nil
}

func (v *view) NewestUnknownCost(w Window) (time.Time, bool, error) {
	if err := v.prepare(); err != nil {
		return time.Time{}, false, err
	}
	f, t := v.through(w)
	segs := v.segs(f, t)
	for i := len(segs) - 1; i >= 0; i-- {
		at, ok, err := v.newestUnknownIn(segs[i])
		if err != nil || ok {
			return at, ok, err
		}
	}
	return time.Time{}, false, nil
}

// inFlightSQL holds for a usage row that is a request in flight at the
// view's now (its arguments: inFlightArgs): an open reservation within its
// deadline plus grace and younger than MaxInFlight. InFlight counts these
// rows and NewestUnknownCost skips them, so that a cost budget neither
// counts a request in flight as usage of unknown cost nor waits for it to
// leave the window.
const inFlightSQL = `(state = 0 AND expires_ms > ? AND ts_ms >= ?)`

func (v *view) inFlightArgs() []any {
	now := v.now.UnixMilli()
	return []any{now, now - MaxInFlight.Milliseconds()}
}

func (v *view) InFlight(w Window, upTo int64) (int64, error) {
	f, t := v.through(w)
	now := v.now.UnixMilli()
	f = max(f, now-MaxInFlight.Milliseconds())
	if f >= t || upTo <= 0 {
		return 0, nil
	}
	if v.open != nil {
		if n := v.open(f, t, now); n >= upTo {
			return n, nil
		}
	}
	var n int64
	err := v.q.QueryRowContext(v.ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM usage WHERE ts_ms >= ? AND ts_ms < ? AND `+inFlightSQL+` LIMIT ?)`,
		append([]any{f, t}, append(v.inFlightArgs(), upTo)...)...).Scan(&n)
	if err != nil {
		return 0, &dbError{err}
	}
	return n, nil
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
	if err := conn.QueryRowContext(ctx, qPrunedUntil).Scan(&v.prunedUntil); err != nil {
		return fmt.Errorf("ledger view: %w", err)
	}
	return fn(v)
}
