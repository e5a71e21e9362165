package pgledger

import (
	"math/big"

	"github.com/rotorhq/rotor/ledger"
)

// What a write changes in the rollups: totals (usage_minute, usage_hour)
// and the report's (usage_hour_dims), as the SQLite ledger counts them.

func addT(t *ledger.Totals, d ledger.Totals) {
	t.Requests = satAdd(t.Requests, d.Requests)
	t.Tokens = satAdd(t.Tokens, d.Tokens)
	t.TokensUnknown = satAdd(t.TokensUnknown, d.TokensUnknown)
	t.CostMicros = satAdd(t.CostMicros, d.CostMicros)
	t.CostUnknown = satAdd(t.CostUnknown, d.CostUnknown)
}

func negT(t ledger.Totals) ledger.Totals {
	return ledger.Totals{Requests: -t.Requests, Tokens: -t.Tokens, TokensUnknown: -t.TokensUnknown, CostMicros: -t.CostMicros, CostUnknown: -t.CostUnknown}
}

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
	addT(&d.t, x.t)
	for _, p := range [][2]*int64{{&d.input, &x.input}, {&d.output, &x.output}, {&d.inputNull, &x.inputNull}, {&d.outputNull, &x.outputNull},
		{&d.cached, &x.cached}, {&d.reasoning, &x.reasoning}, {&d.cachedNull, &x.cachedNull}, {&d.reasoningNull, &x.reasoningNull}, {&d.errors, &x.errors}} {
		*p[0] = satAdd(*p[0], *p[1])
	}
}

func (d delta) neg() delta {
	return delta{t: negT(d.t), input: -d.input, output: -d.output, inputNull: -d.inputNull, outputNull: -d.outputNull,
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

// readableSettlement makes each usage value outside 0..MaxUsage unknown
// and reports whether it changed any.
func readableSettlement(s *ledger.Settlement) bool {
	changed := false
	for _, c := range []*ledger.Count{&s.InputTokens, &s.OutputTokens, &s.TotalTokens, &s.CachedInputTokens, &s.ReasoningTokens, &s.CostMicros} {
		if c.Known && !readableV(c.V) {
			*c = ledger.Count{}
			changed = true
		}
	}
	return changed
}

var million = big.NewInt(1_000_000)

// costOf is the SQLite ledger's: round half up of (uncached input x input
// price + cached x cached price + output x output price) / 10^6; unknown
// without a price, with unknown input or output, or cached above input.
func costOf(p *ledger.Price, input, cached, output ledger.Count) ledger.Count {
	if p == nil || !input.Known || !output.Known {
		return ledger.Count{}
	}
	c := int64(0)
	if cached.Known {
		c = cached.V
	}
	if c > input.V {
		return ledger.Count{}
	}
	cachedPrice := p.InputMicros
	if p.CachedInputMicros.Known {
		cachedPrice = p.CachedInputMicros.V
	}
	sum := new(big.Int).Mul(big.NewInt(input.V-c), big.NewInt(p.InputMicros))
	sum.Add(sum, new(big.Int).Mul(big.NewInt(c), big.NewInt(cachedPrice)))
	sum.Add(sum, new(big.Int).Mul(big.NewInt(output.V), big.NewInt(p.OutputMicros)))
	sum.Add(sum, big.NewInt(500_000))
	sum.Quo(sum, million)
	if !sum.IsInt64() || !readableV(sum.Int64()) {
		return ledger.Count{}
	}
	return ledger.Known(sum.Int64())
}
