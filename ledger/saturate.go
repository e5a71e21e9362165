package ledger

import "strconv"

// Issue 14, item 1: a provider that answers absurd usage must not be able
// to stop the ledger. A usage value (tokens, cost in micro-USD) outside
// 0..MaxUsage is unreadable: it is stored, and read, as NULL (unknown),
// never summed. Every sum over rows or rollups saturates at ±SumCap instead
// of failing with SQLite's "integer overflow" or wrapping in Go.

// MaxUsage is the largest usage value a row may hold per field.
const MaxUsage = 1_000_000_000_000

// SumCap is where sums saturate. It is exact as a float64, and two capped
// values still add without overflowing int64.
const SumCap = int64(1) << 62

// SatAdd adds a and b, saturating at ±SumCap, for any int64 inputs.
func SatAdd(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a: // wrapped past the largest int64
		return SumCap
	case b < 0 && s > a: // wrapped past the smallest
		return -SumCap
	}
	return min(max(s, -SumCap), SumCap)
}

// Readable is true for a usage value the ledger reads.
func Readable(v int64) bool { return v >= 0 && v <= MaxUsage }

var (
	sumCapSQL   = strconv.FormatInt(SumCap, 10) + ".0"
	maxUsageSQL = strconv.FormatInt(MaxUsage, 10)
)

// sqlReadable is the SQL expression of column col as this ledger reads it:
// NULL unless it is an integer in 0..MaxUsage.
func sqlReadable(col string) string {
	return "(CASE WHEN typeof(" + col + ") = 'integer' AND " + col + " BETWEEN 0 AND " + maxUsageSQL + " THEN " + col + " END)"
}

// sqlUnreadable is true for a row whose column col holds a value that
// sqlReadable reads as NULL.
func sqlUnreadable(col string) string {
	return "(" + col + " IS NOT NULL AND " + sqlReadable(col) + " IS NULL)"
}

// sqlSum is SUM(expr) that saturates at ±SumCap and is 0 over no rows.
// TOTAL never fails on overflow; it is exact up to 2^53.
func sqlSum(expr string) string {
	return "CAST(MAX(MIN(TOTAL(" + expr + "), " + sumCapSQL + "), -" + sumCapSQL + ") AS INTEGER)"
}

// sqlClamp clamps a rollup column, or a sum of two, to ±SumCap (an integer
// sum that overflows becomes a REAL in SQLite, which the clamp turns back
// into an integer).
func sqlClamp(expr string) string {
	return "CAST(MAX(MIN(" + expr + ", " + sumCapSQL + "), -" + sumCapSQL + ") AS INTEGER)"
}
