package pgledger

import (
	"strconv"

	"github.com/rotorhq/rotor/ledger"
)

// Usage values outside 0..ledger.MaxUsage are read as unknown, and every
// sum saturates at ±ledger.SumCap, as in the SQLite ledger (saturate.go).

var (
	capSQL      = strconv.FormatInt(ledger.SumCap, 10)
	maxUsageSQL = strconv.FormatInt(ledger.MaxUsage, 10)
)

// readable is column col as the ledger reads it: NULL unless in
// 0..MaxUsage.
func readable(col string) string {
	return "(CASE WHEN " + col + " BETWEEN 0 AND " + maxUsageSQL + " THEN " + col + " END)"
}

// sumSat is SUM(expr), 0 over no rows, clamped to ±SumCap.
func sumSat(expr string) string {
	return "LEAST(GREATEST(COALESCE(SUM((" + expr + ")::numeric), 0), -" + capSQL + "), " + capSQL + ")::bigint"
}

// addSat is a + b clamped to ±SumCap (for rollup upserts).
func addSat(a, b string) string {
	return "LEAST(GREATEST(" + a + "::numeric + " + b + ", -" + capSQL + "), " + capSQL + ")::bigint"
}

var (
	tokensR, costR, inputR, outputR = readable("total_tokens"), readable("cost_micros"), readable("input_tokens"), readable("output_tokens")
	cachedR, reasoningR             = readable("cached_input_tokens"), readable("reasoning_tokens")
)

const (
	minuteMS = int64(60_000)
	hourMS   = 60 * minuteMS
	dayMS    = 24 * hourMS
)

func arg(c ledger.Count) any {
	if !c.Known {
		return nil
	}
	return c.V
}
