package ledger

// The rollups' read side: how a window splits into rollup rows and raw
// ranges (segments) and how each part is read (exactTotals, reachIn,
// newestUnknownIn), and the writer's window cache (windowCache,
// cachedTotals, applyDelta). window.go's WindowReader methods call only
// these.

import (
	"database/sql"
	"errors"
	"fmt"
	"time"
)

const (
	minuteMS = int64(time.Minute / time.Millisecond)
	hourMS   = int64(time.Hour / time.Millisecond)
	dayMS    = 24 * hourMS
)

// windowCache keeps, across the writer's batches, the totals of every row
// at or after a window's start. A rolling window that moved since the last
// batch then costs one small query (the rows that left it), a calendar
// window none, whatever the ledger's size and traffic. The writer applies
// the delta of each of its own writes (applyDelta) and drops the cache
// whenever that could be wrong: another connection committed, a batch
// rolled back, or a window would move back in time.
type windowCache struct {
	entries []*cachedWindow
}

type cachedWindow struct {
	from   int64 // ms: the totals cover every row with ts_ms >= from
	totals Totals
}

// maxCachedWindows bounds the cache: one entry per distinct window start.
const maxCachedWindows = 64

// maxWindowSlide is the furthest an entry slides forward by subtracting
// raw rows; past it, a window is computed afresh from the rollups.
const maxWindowSlide = hourMS

func (c *windowCache) reset() { c.entries = c.entries[:0] }

func (c *windowCache) apply(ts int64, d Totals) {
	for _, e := range c.entries {
		if ts >= e.from {
			e.totals.Add(d)
		}
	}
}

// applyDelta keeps cached windows exact after a write at ts.
func (v *view) applyDelta(ts int64, d Totals) {
	if v.wc != nil {
		v.wc.apply(ts, d)
	}
	for k, t := range v.cache {
		if ts >= k[0] && ts < k[1] {
			t.Add(d)
			v.cache[k] = t
		}
	}
}

type segKind int

const (
	segRaw segKind = iota
	segMinute
	segHour
)

type segment struct {
	kind   segKind
	lo, hi int64 // ms, half-open
}

// segments splits [f, t) into raw edges, whole minutes and whole hours
// before hourUntil (the hours that have rollup rows), in time order, so that
// a window reads at most two short raw ranges and a bounded number of rollup
// rows whatever the ledger's size; and the rows from foldUntil on, which no
// rollup counts yet, as one raw range. A raw segment before foldUntil never
// crosses a minute boundary (rawTotals relies on it).
func segments(f, t, hourUntil, foldUntil int64) []segment {
	if f >= t {
		return nil
	}
	if foldUntil < t {
		cut := max(f, foldUntil)
		return append(rolledSegments(f, cut, hourUntil), segment{segRaw, cut, t})
	}
	return rolledSegments(f, t, hourUntil)
}

// rolledSegments splits a range before the fold frontier.
func rolledSegments(f, t, hourUntil int64) []segment {
	if f >= t {
		return nil
	}
	m1, m2 := CeilTo(f, minuteMS), FloorTo(t, minuteMS)
	if m1 > m2 { // inside one minute
		return []segment{{segRaw, f, t}}
	}
	if m1 == m2 { // two partial minutes
		var out []segment
		if f < m1 {
			out = append(out, segment{segRaw, f, m1})
		}
		if m1 < t {
			out = append(out, segment{segRaw, m1, t})
		}
		return out
	}
	h1, h2 := CeilTo(f, hourMS), FloorTo(t, hourMS)
	var out []segment
	add := func(k segKind, lo, hi int64) {
		if lo >= hi {
			return
		}
		if n := len(out); n > 0 && out[n-1].kind == k && k != segRaw && out[n-1].hi == lo {
			out[n-1].hi = hi
			return
		}
		out = append(out, segment{k, lo, hi})
	}
	add(segRaw, f, m1)
	if h1 >= h2 {
		add(segMinute, m1, m2)
	} else {
		written := min(max(h1, hourUntil*hourMS), h2)
		add(segMinute, m1, h1)
		add(segHour, h1, written)
		add(segMinute, written, h2)
		add(segMinute, h2, m2)
	}
	add(segRaw, m2, t)
	return out
}

// rawTotals aggregates the rows of [lo, hi), a range inside one minute or
// at or after the fold frontier. It reads either those rows, or (for a
// minute wholly before the frontier) the minute's rollup less the rows of
// the rest of the minute, whichever covers less time that has already passed:
// rows later than now are rare (another process's clock running ahead),
// so the edge of a window ending now costs one rollup row and an empty
// index range instead of a scan of this minute's traffic. Both ways are
// exact.
func (v *view) rawTotals(lo, hi int64) (Totals, error) {
	mb := FloorTo(lo, minuteMS)
	me := mb + minuteMS
	end := v.now.UnixMilli() + 1
	past := func(a, b int64) int64 { return max(0, min(b, end)-a) }
	if me > v.foldUntil || past(mb, lo)+past(hi, me) >= past(lo, hi) {
		return v.totalsQuery(qRawTotals, lo, hi)
	}
	sum, err := v.totalsQuery(qMinuteTotals, mb/minuteMS, mb/minuteMS+1)
	if err != nil {
		return sum, err
	}
	for _, r := range [][2]int64{{mb, lo}, {hi, me}} {
		if r[0] < r[1] {
			rest, err := v.totalsQuery(qRawTotals, r[0], r[1])
			if err != nil {
				return sum, err
			}
			sum.Add(rest.Neg())
		}
	}
	return sum, nil
}

// cachedTotals answers a window that ends now from the writer's cache:
// the entry with the latest start at or before f, slid forward by
// subtracting the rows that have left, or a fresh exact computation that
// becomes a new entry.
func (v *view) cachedTotals(f, t int64) (Totals, error) {
	var best *cachedWindow
	for _, e := range v.wc.entries {
		if e.from <= f && (best == nil || e.from > best.from) {
			best = e
		}
	}
	if best != nil && f-best.from <= maxWindowSlide {
		if best.from < f {
			gone, err := v.totalsQuery(qRawTotals, best.from, f)
			if err != nil {
				return Totals{}, err
			}
			best.totals.Add(gone.Neg())
			best.from = f
		}
		return best.totals, nil
	}
	sum, err := v.exactTotals(f, t)
	if err != nil {
		return Totals{}, err
	}
	// An entry covers every row from f on, as the window does (rows
	// stamped after now included: view.through).
	if len(v.wc.entries) >= maxCachedWindows {
		v.wc.entries = append(v.wc.entries[:0], v.wc.entries[1:]...)
	}
	v.wc.entries = append(v.wc.entries, &cachedWindow{from: f, totals: sum})
	return sum, nil
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
	for _, s := range v.segs(f, t) {
		st, err := v.segTotals(s)
		if err != nil {
			return Totals{}, err
		}
		sum.Add(st)
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

// reachIn walks segment s in time order adding the measure to *cum and
// returns the row time at which *cum reaches need.
func (v *view) reachIn(s segment, m Measure, need int64, cum *int64) (time.Time, bool, error) {
	if s.kind == segRaw && v.prunedMinute(s.lo, s.hi) {
		// Pruned: only the minute's rollup row is left; the measure is
		// reached at the minute's last instant, never earlier.
		st, err := v.totalsQuery(qMinuteTotals, s.lo/minuteMS, s.hi/minuteMS)
		if err != nil {
			return time.Time{}, false, err
		}
		*cum = SatAdd(*cum, measureOf(st, m))
		if *cum >= need {
			return time.UnixMilli(s.hi - 1).UTC(), true, nil
		}
		return time.Time{}, false, nil
	}
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
			*cum = SatAdd(*cum, x)
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
	if SatAdd(*cum, measureOf(st, m)) < need {
		*cum = SatAdd(*cum, measureOf(st, m))
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
		if SatAdd(*cum, b.x) >= need {
			return v.reachIn(segment{sub, b.b * unit, (b.b + 1) * unit}, m, need, cum)
		}
		*cum = SatAdd(*cum, b.x)
	}
	return time.Time{}, false, nil
}

func (v *view) newestUnknownIn(s segment) (time.Time, bool, error) {
	switch {
	case s.kind == segRaw && v.prunedMinute(s.lo, s.hi):
		// Pruned: the minute's rollup row says whether it held a row of
		// unknown cost besides the requests in flight (kept by prune,
		// counted in the rollup); its last instant stands for that row's
		// time.
		st, err := v.totalsQuery(qMinuteTotals, s.lo/minuteMS, s.hi/minuteMS)
		if err != nil || st.CostUnknown == 0 {
			return time.Time{}, false, err
		}
		var n int64
		if err := v.q.QueryRowContext(v.ctx, `SELECT COUNT(*) FROM usage WHERE ts_ms >= ? AND ts_ms < ? AND `+inFlightSQL,
			append([]any{s.lo, s.hi}, v.inFlightArgs()...)...).Scan(&n); err != nil {
			return time.Time{}, false, &dbError{err}
		}
		if st.CostUnknown <= n {
			return time.Time{}, false, nil
		}
		return time.UnixMilli(s.hi - 1).UTC(), true, nil
	case s.kind == segRaw:
		// Walks the time index back from hi and stops at the first match.
		var ts int64
		err := v.q.QueryRowContext(v.ctx, `SELECT ts_ms FROM usage WHERE ts_ms >= ? AND ts_ms < ? AND `+sqlReadable("cost_micros")+` IS NULL AND NOT `+inFlightSQL+` ORDER BY ts_ms DESC LIMIT 1`,
			append([]any{s.lo, s.hi}, v.inFlightArgs()...)...).Scan(&ts)
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
		// A bucket's unknown cost may be only requests in flight (the
		// rollups count them as unknown): then look further back.
		for hi := s.hi / unit; ; {
			var b sql.NullInt64
			err := v.q.QueryRowContext(v.ctx, `SELECT MAX(bucket) FROM `+table+` WHERE bucket >= ? AND bucket < ? AND cost_null > 0`, s.lo/unit, hi).Scan(&b)
			if err != nil {
				return time.Time{}, false, &dbError{err}
			}
			if !b.Valid {
				return time.Time{}, false, nil
			}
			at, ok, err := v.newestUnknownIn(segment{sub, b.Int64 * unit, (b.Int64 + 1) * unit})
			if err != nil || ok {
				return at, ok, err
			}
			hi = b.Int64
		}
	}
}
