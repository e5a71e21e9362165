package ledger

// The rollups' write side: the fold frontier (fold), the hour rollup's
// frontier (rollHours), and the pending rollup deltas of writes behind the
// fold frontier (addTotals, addDims, flush). The writer calls only these;
// the map of which read uses which table is in doc.go.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Folding (migration 0006). A request's reservation and settlement write
// its usage row only: two commits of one page each. The minute rollup
// (budget windows) and the hourly report rollup are written behind the
// fold frontier, meta fold_until (unix ms): every row before it is counted
// in them, no row at or after it is. Windows and reports read the rows at
// or after the frontier raw; the writer folds them in, a chunk at a time,
// with a few statements that aggregate many rows, instead of three rollup
// upserts (three more pages) per request. A write to a row before the
// frontier (the settlement or release of a reservation that was folded
// while it was open, or a row from a clock behind the frontier) updates
// the rollups itself (see addTotals and addDims).
const (
	// foldRows: fold once this process has written this many
	// reservations since it last caught up.
	foldRows = 512
	// foldChunk bounds the rows one fold reads, so that a backlog (left
	// by a process that died) is folded over several batches rather than
	// in one long stall.
	foldChunk = 4096
	// foldAge: fold, whatever the count, when the frontier is this far
	// behind the clock (ms), so that rows of other processes do not stay
	// raw for long.
	foldAge = 10 * 1000
)

const (
	qFoldUntil = `SELECT value FROM meta WHERE key = 'fold_until'`
	// qFoldCut finds where a chunk ends: the time of the first row past
	// foldChunk rows from the frontier.
	qFoldCut     = `SELECT ts_ms FROM usage WHERE ts_ms >= ? AND ts_ms < ? ORDER BY ts_ms LIMIT 1 OFFSET ?`
	setFoldUntil = `UPDATE meta SET value = ? WHERE key = 'fold_until'`
	addSetAside  = `UPDATE meta SET value = value + ? WHERE key = 'set_aside'`
)

// The rollups count rows as the writer's deltas do (see
// reservationDelta, settlementDelta): a row of unknown tokens or cost
// counts as such, never as zero; the report rollup holds settled rows
// only; errors are settled rows with a status >= 400 or none, or an error
// code. Values are
// read through sqlReadable and summed with sqlSum, as windows read them.
var (
	tokensR, costR, inputR, outputR = sqlReadable("total_tokens"), sqlReadable("cost_micros"), sqlReadable("input_tokens"), sqlReadable("output_tokens")
	cachedR, reasoningR             = sqlReadable("cached_input_tokens"), sqlReadable("reasoning_tokens")

	// setAsideRows makes the unreadable usage of a row written by an older
	// rotor (or by hand) unknown, whole: the row then counts as one request
	// of unknown usage, and can always be folded.
	setAsideRows = `UPDATE usage SET input_tokens = NULL, output_tokens = NULL, total_tokens = NULL, cost_micros = NULL,
  cached_input_tokens = NULL, reasoning_tokens = NULL
WHERE ts_ms >= ? AND ts_ms < ? AND (` + sqlUnreadable("input_tokens") + ` OR ` + sqlUnreadable("output_tokens") + ` OR ` +
		sqlUnreadable("total_tokens") + ` OR ` + sqlUnreadable("cost_micros") + ` OR ` +
		sqlUnreadable("cached_input_tokens") + ` OR ` + sqlUnreadable("reasoning_tokens") + `)`
	foldMinutes = `INSERT INTO usage_minute (bucket, requests, tokens, tokens_null, cost_micros, cost_null)
SELECT ts_ms / 60000, COUNT(*), ` + sqlSum(tokensR) + `, COUNT(*) - COUNT(` + tokensR + `), ` + sqlSum(costR) + `, COUNT(*) - COUNT(` + costR + `)
FROM usage WHERE ts_ms >= ? AND ts_ms < ? GROUP BY 1
` + totalsConflict
	foldDims = `INSERT INTO usage_hour_dims (bucket, operation, model, credential, client, status, requests, input_tokens, output_tokens, total_tokens, tokens_null, cost_micros, cost_null, errors, input_null, output_null,
  cached_input_tokens, cached_null, reasoning_tokens, reasoning_null)
SELECT ts_ms / 3600000, operation, model, credential, client, status,
  COUNT(*), ` + sqlSum(inputR) + `, ` + sqlSum(outputR) + `, ` + sqlSum(tokensR) + `, COUNT(*) - COUNT(` + tokensR + `),
  ` + sqlSum(costR) + `, COUNT(*) - COUNT(` + costR + `), SUM(status >= 400 OR status = 0 OR error_code <> ''),
  COUNT(*) - COUNT(` + inputR + `), COUNT(*) - COUNT(` + outputR + `),
  ` + sqlSum(cachedR) + `, COUNT(*) - COUNT(` + cachedR + `), ` + sqlSum(reasoningR) + `, COUNT(*) - COUNT(` + reasoningR + `)
FROM usage WHERE ts_ms >= ? AND ts_ms < ? AND state = 1 GROUP BY 1, 2, 3, 4, 5, 6
` + dimsConflict
)

// fold moves the frontier towards now when it is due: foldRows
// reservations written since the last catch-up, or a frontier foldAge
// behind. It folds the rows before now, at most a chunk of them; rows at
// now, written by this batch, stay ahead of the frontier.
func (b *batch) fold(now time.Time) error {
	w := b.w
	end := now.UnixMilli()
	if end <= w.foldUntil || (w.unfolded < w.foldRows && end-w.foldUntil < w.foldAge) {
		return nil
	}
	to := end
	var cut int64
	err := b.q.QueryRowContext(b.ctx, qFoldCut, w.foldUntil, end, w.foldChunk).Scan(&cut)
	switch {
	case errors.Is(err, sql.ErrNoRows): // the rest fits in a chunk
	case err != nil:
		return fmt.Errorf("fold: %w", err)
	default:
		// More than a chunk of rows share the frontier's millisecond only
		// in tests with a stopped clock; fold that millisecond whole.
		to = max(cut, w.foldUntil+1)
	}
	// A row that cannot be folded is set aside, never allowed to stop the
	// fold (and with it every write).
	res, err := b.q.ExecContext(b.ctx, setAsideRows, w.foldUntil, to)
	if err != nil {
		return fmt.Errorf("fold: %w", err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		if _, err := b.q.ExecContext(b.ctx, addSetAside, n); err != nil {
			return fmt.Errorf("fold: %w", err)
		}
		b.setAside += n
		// The cached windows summed those rows as they were.
		w.windows.reset()
	}
	for _, q := range []string{foldMinutes, foldDims} {
		if _, err := b.q.ExecContext(b.ctx, q, w.foldUntil, to); err != nil {
			return fmt.Errorf("fold: %w", err)
		}
	}
	if _, err := b.q.ExecContext(b.ctx, setFoldUntil, to); err != nil {
		return fmt.Errorf("fold: %w", err)
	}
	w.foldUntil = to
	if to == end {
		w.unfolded = 0
	}
	return nil
}

// addTotals records a change to the totals of a row at ts in the view's
// cached windows and, when the row is behind the fold frontier (its
// minute's rollup already counts it, or must), in the pending minute
// rollup, and in the hour's when that row is written too. A row at or
// after the frontier is left to fold.
func (b *batch) addTotals(ts int64, x Totals) {
	b.view.applyDelta(ts, x)
	if ts >= b.w.foldUntil {
		return
	}
	m, h := FloorTo(ts, minuteMS)/minuteMS, FloorTo(ts, hourMS)/hourMS
	t := b.minute[m]
	t.Add(x)
	b.minute[m] = t
	if h < b.w.hourUntil {
		t = b.hour[h]
		t.Add(x)
		b.hour[h] = t
	}
}

// The hour rollup is written a full hour behind (migration 0005): hours
// before the frontier hour_rollup_until have exact rows in usage_hour, and
// later hours are read from usage_minute. A request's own writes thus touch
// no hour row; only a late write, the settlement or release of a
// reservation made before the frontier, also updates its hour's row.
const qHourUntil = `SELECT value FROM meta WHERE key = 'hour_rollup_until'`

var rollHourRows = `INSERT OR REPLACE INTO usage_hour (bucket, requests, tokens, tokens_null, cost_micros, cost_null)
SELECT bucket / 60, ` + rollupTotals + ` FROM usage_minute WHERE bucket >= ? AND bucket < ? GROUP BY bucket / 60`

// rollHours moves the frontier to the start of the previous hour, writing
// the hour rows of the hours it passes from their minutes (so never past
// the fold frontier, before which minutes are complete). It reads the
// database once an hour, and after another connection committed, not per
// batch.
func (b *batch) rollHours(now time.Time) error {
	target := min(FloorTo(now.UnixMilli(), hourMS)/hourMS-1, FloorTo(b.w.foldUntil, hourMS)/hourMS)
	if target <= b.w.hourUntil {
		return nil
	}
	if err := b.q.QueryRowContext(b.ctx, qHourUntil).Scan(&b.w.hourUntil); err != nil {
		return fmt.Errorf("hour rollup frontier: %w", err)
	}
	if target <= b.w.hourUntil {
		return nil
	}
	if _, err := b.q.ExecContext(b.ctx, rollHourRows, b.w.hourUntil*60, target*60); err != nil {
		return fmt.Errorf("write hour rollup: %w", err)
	}
	if _, err := b.q.ExecContext(b.ctx, `UPDATE meta SET value = ? WHERE key = 'hour_rollup_until'`, target); err != nil {
		return fmt.Errorf("write hour rollup: %w", err)
	}
	b.w.hourUntil = target
	return nil
}

// addDims records a settled row in the pending report rollup, when the
// row is behind the fold frontier.
func (b *batch) addDims(ts int64, d dims, x delta) {
	if ts >= b.w.foldUntil {
		return
	}
	k := dimKey{hour: FloorTo(ts, hourMS) / hourMS, dims: d}
	dd := b.dims[k]
	dd.Totals.Add(x.Totals)
	dd.input = SatAdd(dd.input, x.input)
	dd.output = SatAdd(dd.output, x.output)
	dd.inputUnknown = SatAdd(dd.inputUnknown, x.inputUnknown)
	dd.outputUnknown = SatAdd(dd.outputUnknown, x.outputUnknown)
	dd.cached = SatAdd(dd.cached, x.cached)
	dd.reasoning = SatAdd(dd.reasoning, x.reasoning)
	dd.cachedUnknown = SatAdd(dd.cachedUnknown, x.cachedUnknown)
	dd.reasoningUnknown = SatAdd(dd.reasoningUnknown, x.reasoningUnknown)
	dd.errors = SatAdd(dd.errors, x.errors)
	b.dims[k] = dd
}

// The rollups' upserts add to a bucket's row (also used by fold),
// saturating.
var (
	totalsConflict = `ON CONFLICT (bucket) DO UPDATE SET ` +
		`requests = ` + sqlClamp("requests + excluded.requests") + `, ` +
		`tokens = ` + sqlClamp("tokens + excluded.tokens") + `, ` +
		`tokens_null = ` + sqlClamp("tokens_null + excluded.tokens_null") + `, ` +
		`cost_micros = ` + sqlClamp("cost_micros + excluded.cost_micros") + `, ` +
		`cost_null = ` + sqlClamp("cost_null + excluded.cost_null")
	dimsConflict = `ON CONFLICT (bucket, operation, model, credential, client, status) DO UPDATE SET ` +
		`requests = ` + sqlClamp("requests + excluded.requests") + `, ` +
		`input_tokens = ` + sqlClamp("input_tokens + excluded.input_tokens") + `, ` +
		`output_tokens = ` + sqlClamp("output_tokens + excluded.output_tokens") + `, ` +
		`total_tokens = ` + sqlClamp("total_tokens + excluded.total_tokens") + `, ` +
		`tokens_null = ` + sqlClamp("tokens_null + excluded.tokens_null") + `, ` +
		`cost_micros = ` + sqlClamp("cost_micros + excluded.cost_micros") + `, ` +
		`cost_null = ` + sqlClamp("cost_null + excluded.cost_null") + `, ` +
		`errors = ` + sqlClamp("errors + excluded.errors") + `, ` +
		`input_null = ` + sqlClamp("input_null + excluded.input_null") + `, ` +
		`output_null = ` + sqlClamp("output_null + excluded.output_null") + `, ` +
		`cached_input_tokens = ` + sqlClamp("cached_input_tokens + excluded.cached_input_tokens") + `, ` +
		`cached_null = ` + sqlClamp("cached_null + excluded.cached_null") + `, ` +
		`reasoning_tokens = ` + sqlClamp("reasoning_tokens + excluded.reasoning_tokens") + `, ` +
		`reasoning_null = ` + sqlClamp("reasoning_null + excluded.reasoning_null")

	upsertMinute = `INSERT INTO usage_minute (bucket, requests, tokens, tokens_null, cost_micros, cost_null) VALUES (?, ?, ?, ?, ?, ?)
` + totalsConflict
	upsertHour = `INSERT INTO usage_hour (bucket, requests, tokens, tokens_null, cost_micros, cost_null) VALUES (?, ?, ?, ?, ?, ?)
` + totalsConflict
	upsertDims = `INSERT INTO usage_hour_dims (bucket, operation, model, credential, client, status, requests, input_tokens, output_tokens, total_tokens, tokens_null, cost_micros, cost_null, errors, input_null, output_null,
  cached_input_tokens, cached_null, reasoning_tokens, reasoning_null) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
` + dimsConflict
)

// flush writes the pending rollup deltas.
func (b *batch) flush() error {
	for k, t := range b.minute {
		if t != (Totals{}) {
			if _, err := b.q.ExecContext(b.ctx, upsertMinute, k, t.Requests, t.Tokens, t.TokensUnknown, t.CostMicros, t.CostUnknown); err != nil {
				return err
			}
		}
		delete(b.minute, k)
	}
	for k, t := range b.hour {
		if t != (Totals{}) {
			if _, err := b.q.ExecContext(b.ctx, upsertHour, k, t.Requests, t.Tokens, t.TokensUnknown, t.CostMicros, t.CostUnknown); err != nil {
				return err
			}
		}
		delete(b.hour, k)
	}
	for k, d := range b.dims {
		if d != (delta{}) {
			if _, err := b.q.ExecContext(b.ctx, upsertDims, k.hour, k.operation, k.model, k.credential, k.client, k.status,
				d.Requests, d.input, d.output, d.Tokens, d.TokensUnknown, d.CostMicros, d.CostUnknown, d.errors, d.inputUnknown, d.outputUnknown,
				d.cached, d.cachedUnknown, d.reasoning, d.reasoningUnknown); err != nil {
				return err
			}
		}
		delete(b.dims, k)
	}
	return nil
}

// Imported rows (ImportRows, for `rotor ledger copy`). The request ids one
// import wrote are kept in a temporary table, so that the fold queries
// count exactly those rows.
const (
	createImportIDs = `CREATE TEMP TABLE IF NOT EXISTS import_ids (request_id TEXT PRIMARY KEY) WITHOUT ROWID`
	clearImportIDs  = `DELETE FROM temp.import_ids`
	onlyImported    = ` AND request_id IN (SELECT request_id FROM temp.import_ids)`
	rangeWhere      = `WHERE ts_ms >= ? AND ts_ms < ?`
)

var (
	importMinutes = strings.Replace(foldMinutes, rangeWhere, rangeWhere+onlyImported, 1)
	importDims    = strings.Replace(foldDims, rangeWhere, rangeWhere+onlyImported, 1)
	// importHours rewrites the hour rows of the hours behind the hour
	// frontier that imported rows fell in, from their (complete) minutes.
	importHours = `INSERT OR REPLACE INTO usage_hour (bucket, requests, tokens, tokens_null, cost_micros, cost_null)
SELECT bucket / 60, ` + rollupTotals + ` FROM usage_minute WHERE bucket / 60 IN (SELECT DISTINCT u.ts_ms / 3600000 FROM usage u
  WHERE u.request_id IN (SELECT request_id FROM temp.import_ids) AND u.ts_ms < ? AND u.ts_ms / 3600000 < ?) GROUP BY bucket / 60`
)

// foldImported counts the rows an import wrote in [lo, hi] that are behind
// the fold frontier in the minute and report rollups, as the fold would
// have, and rewrites the hour rows behind the hour frontier they fell in.
func foldImported(ctx context.Context, q execQuerier, lo, hi, foldUntil, hourUntil int64) error {
	for _, sql := range []string{importMinutes, importDims} {
		if _, err := q.ExecContext(ctx, sql, lo, min(hi+1, foldUntil)); err != nil {
			return err
		}
	}
	_, err := q.ExecContext(ctx, importHours, foldUntil, hourUntil)
	return err
}
