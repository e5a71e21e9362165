package pgledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotorhq/rotor/ledger"
)

// The window carry: what keeps a lone process's admission batch at two
// round trips with nothing to read ahead.
//
// Every batch that writes rows or rollups (this process's, another's,
// prune, import) bumps meta usage_version in its transaction, under the
// admission lock. A process remembers the version its own last commit
// produced (writer.lastVer) and, with it, the windows its last admission
// batch read, kept exact by every later write of its own (lastWindows'
// totals). When the next admission batch finds the version unchanged, no
// other process wrote since: a calendar window's totals are the carried
// ones, and a rolling window's are the carried ones less the rows that
// left it, which the batch's first statement reads beside the change
// counter and the clock (a few rows at the window's old start). The batch
// then reads nothing ahead; when another process wrote, it reads ahead as
// before (prefetch) and its own commit makes the carry exact again.

// bumpUsageVersion counts a change of rows or rollups; a batch reads the
// new version back.
const bumpUsageVersion = `INSERT INTO meta (key, value) VALUES ('usage_version', 1)
ON CONFLICT (key) DO UPDATE SET value = meta.value + 1 RETURNING value`

// maxCarrySlide is the furthest a rolling window is carried forward by
// subtracting the rows that left it; a longer pause reads it afresh.
const maxCarrySlide = hourMS

// leaveSQL sums the rows [from, n.now + 1 - span) of a rolling window
// carried to the batch's now, as row idx of the batch's first statement.
func leaveSQL(idx, fromParam, spanParam int) string {
	return `SELECT ` + strconv.Itoa(idx) + `, COUNT(*)::bigint, ` + sumSat("COALESCE("+tokensR+", 0)") + `, COUNT(*) - COUNT(` + tokensR + `), ` +
		sumSat("COALESCE("+costR+", 0)") + `, COUNT(*) - COUNT(` + costR + `) FROM usage, n WHERE ts_ms >= $` + strconv.Itoa(fromParam) +
		` AND ts_ms < n.now + 1 - $` + strconv.Itoa(spanParam)
}

// headSQL is the batch's first statement after the lock: one clock
// reading for the whole batch (the test clock's, $1, when set), the change
// counter, the usage version and the prune frontier as row -1, and the
// rows that left each carried rolling window as rows 0..n-1. One statement
// is one snapshot, taken after the lock: it sees every batch committed
// before.
//
// guarded, for a one-round-trip batch, makes the statement fail (division
// by zero, 22012) unless the usage version, the change counter and the
// prune frontier are parameters 2+2n, 3+2n and 4+2n, and, unless parameter
// 5+2n is true (a test clock), the server's clock is at most
// maxEstimateSkew ms ahead of now ($1) and not behind it.
func headSQL(n int, guarded bool) string {
	var b strings.Builder
	last := "0::bigint"
	if guarded {
		k := 2 + 2*n
		last = fmt.Sprintf(`(1 / (CASE WHEN COALESCE((SELECT value FROM meta WHERE key = 'usage_version'), 0) = $%d
  AND (SELECT value FROM meta WHERE key = 'config_version') = $%d AND %s = $%d
  AND ($%d::bool OR %s - n.now BETWEEN 0 AND %d) THEN 1 ELSE 0 END))::bigint`, k, k+1, qPrunedUntil, k+2, k+3, msNow, maxEstimateSkew)
	}
	b.WriteString(`WITH n AS MATERIALIZED (SELECT COALESCE($1::bigint, ` + msNow + `) AS now)
SELECT -1, (SELECT value FROM meta WHERE key = 'config_version'), COALESCE((SELECT value FROM meta WHERE key = 'usage_version'), 0), n.now, ` +
		qPrunedUntil + `, ` + last + ` FROM n`)
	for i := range n {
		b.WriteString("\nUNION ALL\n")
		b.WriteString(leaveSQL(i, 2+2*i, 3+2*i))
	}
	return b.String()
}

// head is what the first statement read.
type head struct {
	cfgVer, usageVer, now, prunedUntil int64
	// left[i] are the rows that left carried rolling window i.
	left []ledger.Totals
}

// queueHead queues the first statement for the carried windows the
// writer would slide (rolling, or of unknown kind, not in pruned time),
// and returns their indexes in w.lastWindows.
func (w *writer) queueHead(pb *pgx.Batch, testNow *int64, estNow int64) []int {
	var slide []int
	if w.lastVer > 0 && estNow-w.lastNow <= maxCarrySlide {
		slide = w.slidable()
	}
	pb.Queue(headSQL(len(slide), false), w.headArgs(testNow, slide)...)
	return slide
}

// slidable returns the indexes in lastWindows of the windows a batch
// slides: rolling (or of unknown kind) and not in pruned time.
func (w *writer) slidable() []int {
	var slide []int
	for i, lw := range w.lastWindows {
		if lw.kind&rolling != 0 && lw.from >= ledger.CeilTo(w.lastPruned, minuteMS) {
			slide = append(slide, i)
		}
	}
	return slide
}

// headArgs are headSQL's parameters before the guard's.
func (w *writer) headArgs(now *int64, slide []int) []any {
	args := []any{now}
	for _, i := range slide {
		lw := w.lastWindows[i]
		args = append(args, lw.from, w.lastNow+1-lw.from)
	}
	return args
}

// readHead reads the first statement's rows.
func readHead(rows pgx.Rows, n int) (head, error) {
	h := head{left: make([]ledger.Totals, n)}
	for rows.Next() {
		var i int
		var a, b, c, d, e int64
		if err := rows.Scan(&i, &a, &b, &c, &d, &e); err != nil {
			rows.Close()
			return h, err
		}
		if i < 0 {
			h.cfgVer, h.usageVer, h.now, h.prunedUntil = a, b, c, d
			continue
		}
		if i < n {
			h.left[i] = ledger.Totals{Requests: a, Tokens: b, TokensUnknown: c, CostMicros: d, CostUnknown: e}
		}
	}
	rows.Close()
	return h, rows.Err()
}

// carry fills the batch's window cache with the carried windows, moved to
// the batch's now, when no other process wrote since this process's last
// commit; it reports whether it did (else the batch reads ahead).
func (b *batch) carry(h head, slide []int) bool {
	w := b.w
	if w.lastVer <= 0 || h.usageVer != w.lastVer || b.now < w.lastNow || b.now-w.lastNow > maxCarrySlide || h.prunedUntil != w.lastPruned {
		return false
	}
	b.carryWindows(slide, h.left)
	return true
}

// carryWindows puts the carried windows, moved to the batch's now, in its
// cache: a calendar window as carried, a rolling one (index slide[j] of
// lastWindows) less left[j], the rows that left it. With left nil, a
// rolling window keeps the rows that left it: its totals are then at
// least the window's (each row adds a non-negative amount).
func (b *batch) carryWindows(slide []int, left []ledger.Totals) {
	w := b.w
	t := b.now + 1
	b.prefetched = map[int64]windowKind{}
	put := func(f int64, kind windowKind, x ledger.Totals) {
		if f >= t {
			return
		}
		b.prefetched[f] |= kind
		b.view.cache[[2]int64{f, t}] = x
	}
	slid := map[int]ledger.Totals{}
	for j, i := range slide {
		if left != nil {
			slid[i] = left[j]
		} else {
			slid[i] = ledger.Totals{}
		}
	}
	for i, lw := range w.lastWindows {
		if lw.kind&calendar != 0 {
			put(lw.from, calendar, lw.totals)
		}
		if l, ok := slid[i]; ok {
			x := lw.totals
			x.Add(l.Neg())
			put(lw.from+(b.now-w.lastNow), rolling, x)
		}
	}
}

// keepCarry records, after a commit that produced usage version ver, the
// windows the next batch may carry. admitted: an admission batch, whose
// view holds its windows exact (each of its writes applied) as read at
// version read; else a batch of this process's own settlements, whose
// deltas are applied to the carried windows.
func (b *batch) keepCarry(ver, read int64, admitted bool) {
	w := b.w
	if admitted {
		w.lastWindows, w.lastNow, w.lastPruned = b.lastWindows(), b.now, b.view.prunedUntil
		w.lastVer = 0
		if ver == read+1 {
			w.lastVer = ver
		}
		return
	}
	if w.lastVer <= 0 || ver != w.lastVer+1 {
		w.lastVer = 0
		return
	}
	for i := range w.lastWindows {
		lw := &w.lastWindows[i]
		for _, d := range b.unflushed {
			if d.ts >= lw.from && d.ts <= w.lastNow {
				lw.totals.Add(d.t)
			}
		}
	}
	w.lastVer = ver
}

// sendCommit sends pb, whose last two statements are bumpUsageVersion and
// COMMIT, in one round trip, and returns the usage version the batch
// produced. lead, when set, reads the results of pb's first statements
// and returns how many it read.
func sendCommit(ctx context.Context, conn *pgxpool.Conn, pb *pgx.Batch, lead func(pgx.BatchResults) (int, error)) (int64, error) {
	n := pb.Len()
	br := conn.SendBatch(ctx, pb)
	var err error
	if lead != nil {
		var k int
		if k, err = lead(br); err != nil {
			br.Close()
			return 0, err
		}
		n -= k
	}
	for range n - 2 {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	var ver int64
	if err == nil {
		err = br.QueryRow().Scan(&ver)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return ver, err
}

// The one-round-trip admission batch. When the carry holds, an admission
// batch needs nothing from the database to decide: the windows are the
// carried ones, and the rows that left a rolling window only lower it. So
// the batch decides first, against the carried windows with those rows
// still in (never below the window's totals: whatever it admits, the exact
// windows admit too), and then sends BEGIN, the lock, a guarded first
// statement, its writes and COMMIT in one round trip. The guard fails the
// transaction unless nothing moved since this process's last commit: the
// usage version (no other process's rows, no prune, no import), the change
// counter (budgets, tokens, prices) and the prune frontier, and the
// server's clock is not behind the batch's estimate of it (rows are
// written at that estimate, never after the server's now) nor more than
// maxEstimateSkew ahead. The same statement reads the rows that left the
// rolling windows, which make the carried windows exact again for the
// next batch. A batch that would refuse anything, reads a window it does
// not carry, settles another process's row or resolves one takes the two
// round trips instead; so does one whose guard failed (rolled back, then
// retried as usual), and the batches after it, for a while that doubles
// while guards keep failing (another process writes too).

// maxEstimateSkew is how far (ms) the server's clock may be ahead of a
// one-round-trip batch's estimate of it.
const maxEstimateSkew = 1000

// maxCarriedWait bounds the admission batches that go the usual way after
// a failed guard.
const maxCarriedWait = 64

// errStale is a one-round-trip batch whose guard failed: its transaction
// is aborted.
var errStale = errors.New("ledger: the carried windows moved")

// errNotCarried is a read in a one-round-trip batch's view: it needs the
// usual batch.
var errNotCarried = errors.New("ledger: window not carried")

// noReads is a one-round-trip batch's querier: it reads nothing.
type noReads struct{}

func (noReads) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, errNotCarried }
func (noReads) QueryRow(context.Context, string, ...any) pgx.Row        { return noRow{} }

type noRow struct{}

func (noRow) Scan(...any) error { return errNotCarried }

// carriedBatch decides ops as a one-round-trip admission batch on conn and
// returns it with its first statements in pb (which holds BEGIN, the
// settings and the lock), or nil when they need the usual batch.
func (w *writer) carriedBatch(ctx context.Context, conn *pgxpool.Conn, ops []*op, pb *pgx.Batch) *batch {
	if w.lastVer <= 0 || !w.needNoRead(ops, true) {
		return nil
	}
	if w.carriedWait > 0 {
		w.carriedWait--
		return nil
	}
	at := time.Now()
	est := w.lastNow + at.Sub(w.lastAt).Milliseconds()
	nowT := time.UnixMilli(est).UTC()
	if w.s.clk != nil {
		nowT = w.s.clk.Now()
		est = nowT.UnixMilli()
	}
	if est < w.lastNow || est-w.lastNow > maxCarrySlide {
		return nil
	}
	b := newBatch(w, ctx, conn, len(ops))
	b.now, b.nowAt, b.readVer = est, at, w.lastVer
	b.view = &view{ctx: ctx, q: noReads{}, now: nowT, budgets: w.budgets, pending: b.pendingIn, cache: map[[2]int64]ledger.Totals{}, prunedUntil: w.lastPruned}
	slide := w.slidable()
	b.carryWindows(slide, nil)
	for _, i := range reservesFirst(ops) {
		if err := b.apply(i, ops[i]); err != nil {
			return nil
		}
	}
	args := append(w.headArgs(&est, slide), w.lastVer, w.cfgVer, w.lastPruned, w.s.clk != nil)
	pb.Queue(headSQL(len(slide), true), args...)
	lastNow := w.lastNow
	b.lead = func(br pgx.BatchResults) (int, error) {
		for range 3 { // BEGIN, the settings, the lock
			if _, err := br.Exec(); err != nil {
				return 0, err
			}
		}
		rows, err := br.Query()
		var h head
		if err == nil {
			h, err = readHead(rows, len(slide))
		}
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "22012" {
			return 0, errStale
		}
		if err != nil {
			return 0, err
		}
		// The rolling windows were decided with the rows that left them;
		// the next batch carries them exact.
		for j, i := range slide {
			k := [2]int64{w.lastWindows[i].from + (est - lastNow), est + 1}
			if x, ok := b.view.cache[k]; ok {
				x.Add(h.left[j].Neg())
				b.view.cache[k] = x
			}
		}
		return 4, nil
	}
	return b
}

// reservesFirst returns the indexes of ops, reservations first: they are
// admitted against the ledger as the batch found it plus the batch's
// earlier reservations (all of the batch's ops are concurrent, so any
// order is one they could have had).
func reservesFirst(ops []*op) []int {
	order := make([]int, 0, len(ops))
	for i, o := range ops {
		if o.kind == opReserve {
			order = append(order, i)
		}
	}
	for i, o := range ops {
		if o.kind != opReserve {
			order = append(order, i)
		}
	}
	return order
}
