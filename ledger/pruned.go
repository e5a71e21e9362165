package ledger

// The pruned usage `rotor ledger copy` carries: the usage a prune deleted
// from the rows lives only in the rollups, so a copy that moves rows would
// read less over pruned time on the target. PrunedUsage reads it from the
// rollups, less what the rows still stored there count (they are copied as
// rows); ImportPruned adds it to the target's rollups and moves its prune
// frontier, so that reports and budget windows over that time read the
// same on both ledgers.
//
// Usage without rows has no request ids, so "skip what is already there"
// cannot be decided row by row. ImportPruned adds it only to a ledger that
// holds no usage before the cut; a ledger whose own pruned usage is equal
// (a second copy) is left as it is; any other is refused with
// ErrPrunedOverlap, before anything is written.

import (
	"cmp"
	"errors"
	"slices"
	"time"
)

// ErrPrunedOverlap refuses to carry pruned usage into a ledger that holds
// usage of its own before the cut: whether that is the same usage (a copy
// made before the prune) or other usage, no rows tell.
var ErrPrunedOverlap = errors.New("the ledger holds usage before the cut")

// PrunedUsage is the usage a prune deleted from the rows, as the rollups
// keep it: per minute (budget windows) and per hour and report keys
// (reports), every bucket before Until's minute or hour (a frontier inside
// one counts it whole, as every read does).
type PrunedUsage struct {
	// Until is the prune frontier; zero when never pruned.
	Until time.Time
	// Minutes, by minute, ascending.
	Minutes []PrunedMinute
	// Hours, by hour and then keys, ascending.
	Hours []PrunedHour
}

// PrunedMinute is one minute's pruned usage.
type PrunedMinute struct {
	// Minute is the minute's start in unix minutes.
	Minute int64
	Totals
}

// PrunedHour is the pruned usage of one hour and one group of report keys.
type PrunedHour struct {
	// Hour is the hour's start in unix hours.
	Hour                                 int64
	Operation, Model, Credential, Client string
	Status                               int
	HourSums
}

// HourSums are the report rollup's sums of one hour and group.
type HourSums struct {
	Requests, InputTokens, OutputTokens, TotalTokens, TokensUnknown, CostMicros, CostUnknown, Errors int64
	InputUnknown, OutputUnknown, CachedInputTokens, CachedUnknown, ReasoningTokens, ReasoningUnknown int64
}

// Cols returns pointers to the sums in the order of the report rollup's
// columns (requests, input, output, total, tokens_null, cost, cost_null,
// errors, input_null, output_null, cached, cached_null, reasoning,
// reasoning_null), for scanning and writing them.
func (h *HourSums) Cols() []*int64 {
	return []*int64{&h.Requests, &h.InputTokens, &h.OutputTokens, &h.TotalTokens, &h.TokensUnknown, &h.CostMicros, &h.CostUnknown,
		&h.Errors, &h.InputUnknown, &h.OutputUnknown, &h.CachedInputTokens, &h.CachedUnknown, &h.ReasoningTokens, &h.ReasoningUnknown}
}

// Requests counts the pruned requests (the minutes' sum).
func (p PrunedUsage) Requests() int64 {
	var n int64
	for _, m := range p.Minutes {
		n = SatAdd(n, m.Totals.Requests)
	}
	return n
}

// Empty reports whether there is no pruned usage to carry.
func (p PrunedUsage) Empty() bool { return len(p.Minutes) == 0 && len(p.Hours) == 0 }

// Equal reports whether p and q hold the same frontier and buckets.
func (p PrunedUsage) Equal(q PrunedUsage) bool {
	return p.Until.Equal(q.Until) && slices.Equal(p.Minutes, q.Minutes) && slices.Equal(p.Hours, q.Hours)
}

// Bounds returns the ends, in unix ms, of the pruned minutes and hours:
// the frontier rounded up to its minute and to its hour.
func (p PrunedUsage) Bounds() (minutes, hours int64) {
	u := p.Until.UnixMilli()
	return CeilTo(u, minuteMS), CeilTo(u, hourMS)
}

// SortPruned puts p's buckets in their order (Minutes, Hours) and drops
// the empty ones.
func SortPruned(p *PrunedUsage) {
	p.Minutes = slices.DeleteFunc(p.Minutes, func(m PrunedMinute) bool { return m.Totals == (Totals{}) })
	p.Hours = slices.DeleteFunc(p.Hours, func(h PrunedHour) bool { return h.HourSums == (HourSums{}) })
	slices.SortFunc(p.Minutes, func(a, b PrunedMinute) int { return cmp.Compare(a.Minute, b.Minute) })
	slices.SortFunc(p.Hours, func(a, b PrunedHour) int {
		switch {
		case a.Hour != b.Hour:
			return cmp.Compare(a.Hour, b.Hour)
		case a.Operation != b.Operation:
			return cmp.Compare(a.Operation, b.Operation)
		case a.Model != b.Model:
			return cmp.Compare(a.Model, b.Model)
		case a.Credential != b.Credential:
			return cmp.Compare(a.Credential, b.Credential)
		case a.Client != b.Client:
			return cmp.Compare(a.Client, b.Client)
		}
		return cmp.Compare(a.Status, b.Status)
	})
}

// ResultRows is what both engines' query results offer (*sql.Rows, pgx.Rows).
type ResultRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanPrunedMinutes reads the pruned minutes query's rows: minute,
// requests, tokens, tokens unknown, cost, cost unknown.
func ScanPrunedMinutes(rows ResultRows) ([]PrunedMinute, error) {
	var out []PrunedMinute
	for rows.Next() {
		var m PrunedMinute
		if err := rows.Scan(&m.Minute, &m.Totals.Requests, &m.Tokens, &m.TokensUnknown, &m.CostMicros, &m.CostUnknown); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// ScanPrunedHours reads the pruned hours query's rows: hour, the report
// keys, then HourSums.Cols.
func ScanPrunedHours(rows ResultRows) ([]PrunedHour, error) {
	var out []PrunedHour
	for rows.Next() {
		var h PrunedHour
		dest := []any{&h.Hour, &h.Operation, &h.Model, &h.Credential, &h.Client, &h.Status}
		for _, c := range h.Cols() {
			dest = append(dest, c)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}
