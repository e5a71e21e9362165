package pgledger

import "github.com/rotorhq/rotor/ledger"

// What a write changes in the rollups: totals (usage_minute, usage_hour)
// and the report's (usage_hour_dims), as the SQLite ledger counts them.

// dims is a row's position in the report rollup.
type dims struct {
	operation, model, credential, client string
	status                               int
}

type dimKey struct {
	hour int64
	dims
}

// delta is one row's contribution to the report rollup (and, through its
// Totals, to the totals).
type delta struct {
	t                                                    ledger.Totals
	input, output, inputNull, outputNull                 int64
	cached, reasoning, cachedNull, reasoningNull, errors int64
}

func (d *delta) add(x delta) {
	d.t.Add(x.t)
	for _, p := range [][2]*int64{{&d.input, &x.input}, {&d.output, &x.output}, {&d.inputNull, &x.inputNull}, {&d.outputNull, &x.outputNull},
		{&d.cached, &x.cached}, {&d.reasoning, &x.reasoning}, {&d.cachedNull, &x.cachedNull}, {&d.reasoningNull, &x.reasoningNull}, {&d.errors, &x.errors}} {
		*p[0] = ledger.SatAdd(*p[0], *p[1])
	}
}

func (d delta) neg() delta {
	return delta{t: d.t.Neg(), input: -d.input, output: -d.output, inputNull: -d.inputNull, outputNull: -d.outputNull,
		cached: -d.cached, reasoning: -d.reasoning, cachedNull: -d.cachedNull, reasoningNull: -d.reasoningNull, errors: -d.errors}
}

func split(c ledger.Count) (v, unknown int64) {
	if c.Known {
		return c.V, 0
	}
	return 0, 1
}

// reservationDelta is an open reservation: a request of unknown usage.
func reservationDelta() delta {
	return delta{t: ledger.Totals{Requests: 1, TokensUnknown: 1, CostUnknown: 1}, inputNull: 1, outputNull: 1, cachedNull: 1, reasoningNull: 1}
}

// rowDelta is a settled row's.
func rowDelta(s ledger.Settlement) delta {
	d := delta{t: ledger.Totals{Requests: 1}}
	d.t.Tokens, d.t.TokensUnknown = split(s.TotalTokens)
	d.t.CostMicros, d.t.CostUnknown = split(s.CostMicros)
	d.input, d.inputNull = split(s.InputTokens)
	d.output, d.outputNull = split(s.OutputTokens)
	d.cached, d.cachedNull = split(s.CachedInputTokens)
	d.reasoning, d.reasoningNull = split(s.ReasoningTokens)
	if s.Status >= 400 || s.Status == 0 || s.ErrorCode != "" {
		d.errors = 1
	}
	return d
}
