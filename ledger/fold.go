package ledger

import (
	"database/sql"
	"errors"
	"fmt"
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
// only; errors are settled rows with a status >= 400 or none. Values are
// read through sqlReadable and summed with sqlSum, as windows read them.
var (
	tokensR, costR, inputR, outputR = sqlReadable("total_tokens"), sqlReadable("cost_micros"), sqlReadable("input_tokens"), sqlReadable("output_tokens")

	// setAsideRows makes the unreadable usage of a row written by an older
	// rotor (or by hand) unknown, whole: the row then counts as one request
	// of unknown usage, and can always be folded.
	setAsideRows = `UPDATE usage SET input_tokens = NULL, output_tokens = NULL, total_tokens = NULL, cost_micros = NULL
WHERE ts_ms >= ? AND ts_ms < ? AND (` + sqlUnreadable("input_tokens") + ` OR ` + sqlUnreadable("output_tokens") + ` OR ` +
		sqlUnreadable("total_tokens") + ` OR ` + sqlUnreadable("cost_micros") + `)`
	foldMinutes = `INSERT INTO usage_minute (bucket, requests, tokens, tokens_null, cost_micros, cost_null)
SELECT ts_ms / 60000, COUNT(*), ` + sqlSum(tokensR) + `, COUNT(*) - COUNT(` + tokensR + `), ` + sqlSum(costR) + `, COUNT(*) - COUNT(` + costR + `)
FROM usage WHERE ts_ms >= ? AND ts_ms < ? GROUP BY 1
` + totalsConflict
	foldDims = `INSERT INTO usage_hour_dims (bucket, operation, model, credential, client, status, requests, input_tokens, output_tokens, total_tokens, tokens_null, cost_micros, cost_null, errors, input_null, output_null)
SELECT ts_ms / 3600000, operation, model, credential, client, status,
  COUNT(*), ` + sqlSum(inputR) + `, ` + sqlSum(outputR) + `, ` + sqlSum(tokensR) + `, COUNT(*) - COUNT(` + tokensR + `),
  ` + sqlSum(costR) + `, COUNT(*) - COUNT(` + costR + `), SUM(status >= 400 OR status = 0),
  COUNT(*) - COUNT(` + inputR + `), COUNT(*) - COUNT(` + outputR + `)
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
