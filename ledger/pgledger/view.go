package pgledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotorhq/rotor/ledger"
)

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// view implements ledger.WindowReader over one transaction: a batch's
// (admission) or a read-only one (View).
type view struct {
	ctx     context.Context
	q       querier
	now     time.Time
	budgets []ledger.BudgetRecord
	// flush, in a batch, writes the batch's pending rows and rollup deltas
	// before a query reads them.
	flush func() error
	// pending, in a batch, sums the batch's deltas not yet written in
	// [f, t); ok=false: flush first.
	pending func(f, t int64) (ledger.Totals, bool)
	// cache holds the windows computed in this view, kept exact by
	// applyDelta after each later write of the batch.
	cache map[[2]int64]ledger.Totals
	// used lists the windows ending now+1ms that Totals was asked for.
	used [][2]int64
	// prunedUntil is the prune frontier (unix ms, prune.go): settled rows
	// before it may be gone, only the rollups describe that time.
	prunedUntil int64
}

func (v *view) Now() time.Time                 { return v.now }
func (v *view) Budgets() []ledger.BudgetRecord { return v.budgets }

func (v *view) prepare() error {
	if v.flush != nil {
		if err := v.flush(); err != nil {
			return &dbError{err}
		}
	}
	return nil
}

func (v *view) applyDelta(ts int64, d ledger.Totals) {
	for k, t := range v.cache {
		if ts >= k[0] && ts < k[1] {
			t.Add(d)
			v.cache[k] = t
		}
	}
}

// part is a piece of a window: rollup buckets [lo, hi) of a table, or raw
// rows [lo, hi) (ms), added or (sign -1) subtracted.
type part struct {
	table  string // usage_hour, usage_minute or usage
	lo, hi int64
	sign   int64
}

// parts splits [f, t) into whole hours, whole minutes and raw edges. A raw
// edge inside a minute is read as that minute's rollup less the rest of
// the minute when the rest holds less time that has passed (the edge of a
// window ending now is the minute's row less no rows after now), so that
// a window reads a bounded number of rows whatever the traffic.
func parts(f, t, now int64) []part {
	var out []part
	if f >= t {
		return nil
	}
	m1, m2 := ledger.CeilTo(f, minuteMS), ledger.FloorTo(t, minuteMS)
	if m1 > m2 {
		return edge(nil, f, t, now)
	}
	out = edge(out, f, m1, now)
	for _, s := range rolled(m1, m2) {
		unit, _ := unitOf(s.table)
		out = appendPart(out, part{s.table, s.lo / unit, s.hi / unit, 1})
	}
	return edge(out, m2, t, now)
}

func appendPart(out []part, p part) []part {
	if p.lo < p.hi {
		out = append(out, p)
	}
	return out
}

// edge adds the rows [lo, hi) inside one minute.
func edge(out []part, lo, hi, now int64) []part {
	if lo >= hi {
		return out
	}
	mb := ledger.FloorTo(lo, minuteMS)
	me := mb + minuteMS
	end := now + 1
	past := func(a, b int64) int64 { return max(0, min(b, end)-a) }
	if past(mb, lo)+past(hi, me) >= past(lo, hi) {
		return append(out, part{"usage", lo, hi, 1})
	}
	out = append(out, part{"usage_minute", mb / minuteMS, mb/minuteMS + 1, 1})
	out = appendPart(out, part{"usage", mb, lo, -1})
	return appendPart(out, part{"usage", hi, me, -1})
}

// totalsSQL is one query summing parts.
func totalsSQL(ps []part) (string, []any) {
	var sub []string
	var args []any
	for _, p := range ps {
		n := len(args)
		args = append(args, p.lo, p.hi)
		sign := "1"
		if p.sign < 0 {
			sign = "-1"
		}
		if p.table == "usage" {
			sub = append(sub, fmt.Sprintf(`SELECT %[1]s AS r, %[1]s * COALESCE(%[2]s, 0) AS tk, %[1]s * (CASE WHEN %[2]s IS NULL THEN 1 ELSE 0 END) AS tn,
  %[1]s * COALESCE(%[3]s, 0) AS c, %[1]s * (CASE WHEN %[3]s IS NULL THEN 1 ELSE 0 END) AS cn FROM usage WHERE ts_ms >= $%[4]d AND ts_ms < $%[5]d`,
				sign, tokensR, costR, n+1, n+2))
			continue
		}
		sub = append(sub, fmt.Sprintf(`SELECT %[1]s * requests AS r, %[1]s * tokens AS tk, %[1]s * tokens_null AS tn, %[1]s * cost_micros AS c, %[1]s * cost_null AS cn FROM %[2]s WHERE bucket >= $%[3]d AND bucket < $%[4]d`,
			sign, p.table, n+1, n+2))
	}
	return `SELECT ` + sumSat("r") + `, ` + sumSat("tk") + `, ` + sumSat("tn") + `, ` + sumSat("c") + `, ` + sumSat("cn") + ` FROM (` + strings.Join(sub, "\nUNION ALL\n") + `) x`, args
}

// through returns the end, in ms, to read a window ending at t through: a
// window that ends now (t = now+1ms, as every budget's does) also holds
// the rows stamped after now, as the SQLite ledger's does. The database's
// clock stamps the rows, and when it steps back (an NTP correction, a
// failover to a host behind), usage already written must not drop out
// of every budget window.
func through(t, now int64) int64 {
	if t == now+1 {
		return endOfTime
	}
	return t
}

// endOfTime is past every row's time (ms).
const endOfTime = int64(1) << 60

func (v *view) Totals(w ledger.Window) (ledger.Totals, error) {
	f, t := v.round(w.From.UnixMilli(), w.To.UnixMilli())
	key := [2]int64{f, t}
	if t == v.now.UnixMilli()+1 && v.pending != nil {
		v.used = append(v.used, key)
	}
	if got, ok := v.cache[key]; ok {
		return got, nil
	}
	var sum ledger.Totals
	if v.pending != nil {
		p, ok := v.pending(f, t)
		if !ok {
			if err := v.prepare(); err != nil {
				return ledger.Totals{}, err
			}
			p, _ = v.pending(f, t)
		}
		sum = p
	}
	if ps := parts(f, through(t, v.now.UnixMilli()), v.now.UnixMilli()); len(ps) > 0 {
		q, args := totalsSQL(ps)
		var db ledger.Totals
		if err := v.q.QueryRow(v.ctx, q, args...).Scan(&db.Requests, &db.Tokens, &db.TokensUnknown, &db.CostMicros, &db.CostUnknown); err != nil {
			return ledger.Totals{}, &dbError{fmt.Errorf("window totals: %w", err)}
		}
		sum.Add(db)
	}
	if v.cache != nil {
		v.cache[key] = sum
	}
	return sum, nil
}

// segment is a time-ordered piece of a window for Reach and
// NewestUnknownCost: raw rows, whole minutes or whole hours.
type segment struct {
	table  string
	lo, hi int64 // ms
}

func segments(f, t int64) []segment {
	if f >= t {
		return nil
	}
	m1, m2 := ledger.CeilTo(f, minuteMS), ledger.FloorTo(t, minuteMS)
	if m1 >= m2 {
		return []segment{{"usage", f, t}}
	}
	out := []segment{{"usage", f, m1}}
	out = append(out, rolled(m1, m2)...)
	out = append(out, segment{"usage", m2, t})
	return nonEmpty(out)
}

// rolled splits [m1, m2), whole minutes, into whole days, the hours
// around them and the minutes around those, in time order.
func rolled(m1, m2 int64) []segment {
	h1, h2 := ledger.CeilTo(m1, hourMS), ledger.FloorTo(m2, hourMS)
	if h1 >= h2 {
		return nonEmpty([]segment{{"usage_minute", m1, m2}})
	}
	d1, d2 := ledger.CeilTo(h1, dayMS), ledger.FloorTo(h2, dayMS)
	if d1 >= d2 {
		return nonEmpty([]segment{{"usage_minute", m1, h1}, {"usage_hour", h1, h2}, {"usage_minute", h2, m2}})
	}
	return nonEmpty([]segment{{"usage_minute", m1, h1}, {"usage_hour", h1, d1}, {"usage_day", d1, d2}, {"usage_hour", d2, h2}, {"usage_minute", h2, m2}})
}

func nonEmpty(ss []segment) []segment {
	out := ss[:0]
	for _, s := range ss {
		if s.lo < s.hi {
			out = append(out, s)
		}
	}
	return out
}

func unitOf(table string) (unit int64, sub string) {
	switch table {
	case "usage_day":
		return dayMS, "usage_hour"
	case "usage_hour":
		return hourMS, "usage_minute"
	}
	return minuteMS, "usage"
}

var (
	measureCol = map[ledger.Measure]string{ledger.MeasureRequests: "requests", ledger.MeasureTokens: "tokens", ledger.MeasureCost: "cost_micros"}
	measureRaw = map[ledger.Measure]string{ledger.MeasureRequests: "1", ledger.MeasureTokens: "COALESCE(" + tokensR + ", 0)", ledger.MeasureCost: "COALESCE(" + costR + ", 0)"}
)

func (v *view) Reach(w ledger.Window, m ledger.Measure, need int64) (time.Time, bool, error) {
	if need <= 0 {
		return w.From, true, nil
	}
	if err := v.prepare(); err != nil {
		return time.Time{}, false, err
	}
	cum := int64(0)
	f, t := v.round(w.From.UnixMilli(), w.To.UnixMilli())
	for _, s := range segments(f, through(t, v.now.UnixMilli())) {
		at, ok, err := v.reachIn(s, m, need, &cum)
		if err != nil || ok {
			return at, ok, err
		}
	}
	return time.Time{}, false, nil
}

// reachIn walks s in time order adding the measure to *cum, descending
// from hours to minutes to rows only into the bucket where it reaches
// need.
func (v *view) reachIn(s segment, m ledger.Measure, need int64, cum *int64) (time.Time, bool, error) {
	var q string
	unit, sub := unitOf(s.table)
	args := []any{s.lo, s.hi}
	if s.table == "usage" && v.prunedMinute(s.hi) {
		// Pruned: only the minute's rollup row is left; the measure is
		// reached at the minute's last instant, never earlier.
		var x int64
		m0 := ledger.FloorTo(s.lo, minuteMS)
		if err := v.q.QueryRow(v.ctx, `SELECT COALESCE(SUM(`+measureCol[m]+`), 0)::bigint FROM usage_minute WHERE bucket = $1`, m0/minuteMS).Scan(&x); err != nil {
			return time.Time{}, false, &dbError{err}
		}
		if *cum = ledger.SatAdd(*cum, x); *cum >= need {
			return time.UnixMilli(m0 + minuteMS - 1).UTC(), true, nil
		}
		return time.Time{}, false, nil
	}
	if s.table == "usage" {
		q = `SELECT ts_ms, ` + measureRaw[m] + ` FROM usage WHERE ts_ms >= $1 AND ts_ms < $2 ORDER BY ts_ms`
	} else {
		q = `SELECT bucket, ` + measureCol[m] + ` FROM ` + s.table + ` WHERE bucket >= $1 AND bucket < $2 AND ` + measureCol[m] + ` <> 0 ORDER BY bucket`
		args = []any{s.lo / unit, s.hi / unit}
	}
	rows, err := v.q.Query(v.ctx, q, args...)
	if err != nil {
		return time.Time{}, false, &dbError{err}
	}
	type item struct{ k, x int64 }
	var items []item
	for rows.Next() {
		var it item
		if err := rows.Scan(&it.k, &it.x); err != nil {
			rows.Close()
			return time.Time{}, false, &dbError{err}
		}
		if s.table == "usage" {
			*cum = ledger.SatAdd(*cum, it.x)
			if *cum >= need {
				rows.Close()
				return time.UnixMilli(it.k).UTC(), true, nil
			}
			continue
		}
		items = append(items, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return time.Time{}, false, &dbError{err}
	}
	for _, it := range items {
		if ledger.SatAdd(*cum, it.x) >= need {
			return v.reachIn(segment{sub, it.k * unit, (it.k + 1) * unit}, m, need, cum)
		}
		*cum = ledger.SatAdd(*cum, it.x)
	}
	return time.Time{}, false, nil
}

func (v *view) NewestUnknownCost(w ledger.Window) (time.Time, bool, error) {
	if err := v.prepare(); err != nil {
		return time.Time{}, false, err
	}
	f, t := v.round(w.From.UnixMilli(), w.To.UnixMilli())
	segs := segments(f, through(t, v.now.UnixMilli()))
	for i := len(segs) - 1; i >= 0; i-- {
		at, ok, err := v.newestUnknownIn(segs[i])
		if err != nil || ok {
			return at, ok, err
		}
	}
	return time.Time{}, false, nil
}

func (v *view) newestUnknownIn(s segment) (time.Time, bool, error) {
	now, oldest := v.inFlightArgs()
	if s.table == "usage" && v.prunedMinute(s.hi) {
		// Pruned: the minute's rollup row says whether it held a row of
		// unknown cost besides the requests in flight (kept by prune,
		// counted in the rollup); its last instant stands for that row's
		// time.
		m0 := ledger.FloorTo(s.lo, minuteMS)
		var n int64
		if err := v.q.QueryRow(v.ctx, `SELECT COALESCE((SELECT SUM(cost_null) FROM usage_minute WHERE bucket = $1), 0)::bigint
  - (SELECT COUNT(*) FROM usage WHERE ts_ms >= $2 AND ts_ms < $3 AND `+inFlightSQL(4)+`)`, m0/minuteMS, m0, m0+minuteMS, now, oldest).Scan(&n); err != nil {
			return time.Time{}, false, &dbError{err}
		}
		if n <= 0 {
			return time.Time{}, false, nil
		}
		return time.UnixMilli(m0 + minuteMS - 1).UTC(), true, nil
	}
	if s.table == "usage" {
		var ts int64
		err := v.q.QueryRow(v.ctx, `SELECT ts_ms FROM usage WHERE ts_ms >= $1 AND ts_ms < $2 AND `+costR+` IS NULL AND NOT `+inFlightSQL(3)+` ORDER BY ts_ms DESC LIMIT 1`,
			s.lo, s.hi, now, oldest).Scan(&ts)
		if errors.Is(err, pgx.ErrNoRows) {
			return time.Time{}, false, nil
		}
		if err != nil {
			return time.Time{}, false, &dbError{err}
		}
		return time.UnixMilli(ts).UTC(), true, nil
	}
	unit, sub := unitOf(s.table)
	// A bucket's unknown cost may be only requests in flight (the rollups
	// count them as unknown): then look further back.
	for hi := s.hi / unit; ; {
		var b *int64
		if err := v.q.QueryRow(v.ctx, `SELECT MAX(bucket) FROM `+s.table+` WHERE bucket >= $1 AND bucket < $2 AND cost_null > 0`, s.lo/unit, hi).Scan(&b); err != nil {
			return time.Time{}, false, &dbError{err}
		}
		if b == nil {
			return time.Time{}, false, nil
		}
		at, ok, err := v.newestUnknownIn(segment{sub, *b * unit, (*b + 1) * unit})
		if err != nil || ok {
			return at, ok, err
		}
		hi = *b
	}
}

// inFlightSQL(n) holds for a usage row that is a request in flight at
// the view's now (its arguments $n and $n+1: inFlightArgs): an open
// reservation within its deadline plus grace and younger than
// ledger.MaxInFlight. InFlight counts these rows and NewestUnknownCost
// skips them, so that a cost budget neither counts a request in flight as
// usage of unknown cost nor waits for it to leave the window.
func inFlightSQL(n int) string {
	return fmt.Sprintf(`(state = 0 AND expires_ms > $%d AND ts_ms >= $%d)`, n, n+1)
}

func (v *view) inFlightArgs() (now, oldest int64) {
	now = v.now.UnixMilli()
	return now, now - ledger.MaxInFlight.Milliseconds()
}

func (v *view) InFlight(w ledger.Window, upTo int64) (int64, error) {
	now := v.now.UnixMilli()
	f, t := w.From.UnixMilli(), through(w.To.UnixMilli(), now)
	f = max(f, now-ledger.MaxInFlight.Milliseconds())
	if f >= t || upTo <= 0 {
		return 0, nil
	}
	if err := v.prepare(); err != nil {
		return 0, err
	}
	var n int64
	inNow, oldest := v.inFlightArgs()
	err := v.q.QueryRow(v.ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM usage WHERE ts_ms >= $1 AND ts_ms < $2 AND `+inFlightSQL(3)+` LIMIT $5) x`,
		f, t, inNow, oldest, upTo).Scan(&n)
	if err != nil {
		return 0, &dbError{err}
	}
	return n, nil
}

// View runs fn on a consistent read-only view of the ledger now.
func (s *Store) View(ctx context.Context, fn func(ledger.WindowReader) error) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	ctx, cancel := readCtx(ctx)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return s.wrap("ledger view", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var nowMS, prunedUntil int64
	if err := tx.QueryRow(ctx, `SELECT `+msNow+`, `+qPrunedUntil).Scan(&nowMS, &prunedUntil); err != nil {
		return s.wrap("ledger view", err)
	}
	now := time.UnixMilli(nowMS).UTC()
	if s.clk != nil {
		now = s.clk.Now()
	}
	bs, err := listBudgets(ctx, tx)
	if err != nil {
		return s.wrap("ledger view", err)
	}
	err = fn(&view{ctx: ctx, q: tx, now: now, budgets: bs, prunedUntil: prunedUntil})
	var dbe *dbError
	if errors.As(err, &dbe) {
		return s.wrap("ledger view", dbe.err)
	}
	return err
}
