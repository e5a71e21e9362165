package ledger

import "time"

// The engine-neutral pieces both engines use: this package's SQLite store
// and ledger/pgledger. They know nothing of SQL dialects or drivers; what
// they scan comes from either database/sql or pgx, whose rows both have
// Next, Scan and Err.

// FloorTo is t rounded down to a multiple of unit (also for t < 0).
func FloorTo(t, unit int64) int64 {
	r := t % unit
	if r < 0 {
		r += unit
	}
	return t - r
}

// CeilTo is t rounded up to a multiple of unit.
func CeilTo(t, unit int64) int64 {
	f := FloorTo(t, unit)
	if f == t {
		return t
	}
	return f + unit
}

// CountOf is a scanned nullable column: unknown when NULL.
func CountOf(p *int64) Count {
	if p == nil {
		return Count{}
	}
	return Known(*p)
}

// Scanner is one result row: *sql.Row, *sql.Rows, pgx.Row and pgx.Rows
// are all Scanners.
type Scanner interface {
	Scan(dest ...any) error
}

// Rows is a result set as both engines' drivers return it (*sql.Rows,
// pgx.Rows); the caller closes it.
type Rows interface {
	Scanner
	Next() bool
	Err() error
}

// ScanRow reads one usage row selected as request_id, ts_ms, state,
// expires_ms, operation, pool, model, credential, region, client, attempts,
// status, error_code, then input, output, total tokens, cost, latency (0
// for NULL), cached input and reasoning tokens, each usage value read as
// NULL outside 0..MaxUsage by the engine's own SQL.
func ScanRow(sc Scanner) (Row, error) {
	var r Row
	var ts, exp, lat int64
	var state int
	var in, outT, tot, cost, cached, reasoning *int64
	if err := sc.Scan(&r.RequestID, &ts, &state, &exp, &r.Operation, &r.Pool, &r.Model, &r.Credential, &r.Region, &r.Client,
		&r.Attempts, &r.Status, &r.ErrorCode, &in, &outT, &tot, &cost, &lat, &cached, &reasoning); err != nil {
		return Row{}, err
	}
	r.Time, r.Expires, r.Settled, r.Latency = time.UnixMilli(ts).UTC(), time.UnixMilli(exp).UTC(), state == 1, time.Duration(lat)*time.Millisecond
	r.InputTokens, r.OutputTokens, r.TotalTokens, r.CostMicros = CountOf(in), CountOf(outT), CountOf(tot), CountOf(cost)
	r.CachedInputTokens, r.ReasoningTokens = CountOf(cached), CountOf(reasoning)
	return r, nil
}

// ScanRows reads every row of rows with ScanRow.
func ScanRows(rows Rows) ([]Row, error) {
	var out []Row
	for rows.Next() {
		r, err := ScanRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ScanTokens reads the client token list, selected as label, hash, into
// hash -> label.
func ScanTokens(rows Rows) (map[[32]byte]string, error) {
	m := map[[32]byte]string{}
	for rows.Next() {
		var label string
		var h []byte
		if err := rows.Scan(&label, &h); err != nil {
			return nil, err
		}
		var k [32]byte
		copy(k[:], h)
		m[k] = label
	}
	return m, rows.Err()
}
