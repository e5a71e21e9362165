package pgledger

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
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
func headSQL(n int) string {
	var b strings.Builder
	b.WriteString(`WITH n AS MATERIALIZED (SELECT COALESCE($1::bigint, ` + msNow + `) AS now)
SELECT -1, (SELECT value FROM meta WHERE key = 'config_version'), COALESCE((SELECT value FROM meta WHERE key = 'usage_version'), 0), n.now, ` +
		qPrunedUntil + `, 0::bigint FROM n`)
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
	args := []any{testNow}
	if w.lastVer > 0 && estNow-w.lastNow <= maxCarrySlide {
		for i, lw := range w.lastWindows {
			if lw.kind&rolling != 0 && lw.from >= ledger.CeilTo(w.lastPruned, minuteMS) {
				slide = append(slide, i)
				args = append(args, lw.from, w.lastNow+1-lw.from)
			}
		}
	}
	pb.Queue(headSQL(len(slide)), args...)
	return slide
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
		slid[i] = h.left[j]
	}
	for i, lw := range w.lastWindows {
		if lw.kind&calendar != 0 {
			put(lw.from, calendar, lw.totals)
		}
		if left, ok := slid[i]; ok {
			x := lw.totals
			x.Add(left.Neg())
			put(lw.from+(b.now-w.lastNow), rolling, x)
		}
	}
	return true
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
// produced.
func sendCommit(ctx context.Context, conn *pgxpool.Conn, pb *pgx.Batch) (int64, error) {
	n := pb.Len()
	br := conn.SendBatch(ctx, pb)
	var err error
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
