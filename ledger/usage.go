package ledger

import (
	"time"
)

// Count is an integer that may be unknown (NULL in the database).
type Count struct {
	V     int64
	Known bool
}

// Known returns a known count.
func Known(v int64) Count { return Count{V: v, Known: true} }

// split returns a known count's value and 0, or 0 and 1 (one row of
// unknown value), as the rollups count them.
func (c Count) split() (v, unknown int64) {
	if c.Known {
		return c.V, 0
	}
	return 0, 1
}

func (c Count) arg() any {
	if !c.Known {
		return nil
	}
	return c.V
}

// readable returns c, or unknown when it is outside 0..MaxUsage.
func (c Count) readable() Count {
	if c.Known && !Readable(c.V) {
		return Count{}
	}
	return c
}

// Reservation is written at admission, before any provider call: it counts
// as one request of unknown tokens and cost until it is settled or
// released.
type Reservation struct {
	RequestID string
	// Expires is when an unsettled reservation is considered abandoned
	// (the request's deadline plus a grace period). Informational: an
	// abandoned reservation keeps counting as a request of unknown usage.
	Expires   time.Time
	Operation string
	Pool      string
	Model     string
	Region    string
	Client    string
	// Token, when CheckToken is set, is the SHA-256 of the client token
	// that sent the request: admission refuses it with ErrTokenRevoked
	// when the token is no longer stored, so a token revoked by another
	// process stops at its next request even when the caller's front door
	// checked it against a cached list.
	Token      [32]byte
	CheckToken bool
	// Priced is set by the ledger, before admission, when Model has a
	// price (for operations other than Decisions): the price is taken
	// then and kept for the settlement's cost.
	Priced bool
}

// Settlement completes a reservation with what the request did.
type Settlement struct {
	RequestID string
	// Model is the model as sent upstream.
	Model string
	// Credential is the name (a label, never the key) of the credential
	// whose call answered.
	Credential   string
	Region       string
	Attempts     int
	Status       int
	ErrorCode    string
	InputTokens  Count
	OutputTokens Count
	TotalTokens  Count
	// CachedInputTokens (part of InputTokens) and ReasoningTokens (part
	// of OutputTokens) are unknown when the provider did not report them.
	CachedInputTokens Count
	ReasoningTokens   Count
	// Refused marks a provider's 4xx answer with a structured error body:
	// the provider did not bill it, so the row records 0 tokens and 0
	// cost, whatever the price.
	Refused bool
	// CostMicros is the cost in micro-USD of a Decisions row (unknown, as
	// the spec says). For other operations it is ignored: the ledger
	// computes the cost from the price taken at admission (see costOf).
	CostMicros Count
	Latency    time.Duration

	// cachedAbove: the provider reported more cached tokens than any
	// readable input (ForgetUnreadable then made the count unknown).
	cachedAbove bool
}

// ForgetUnreadable makes each usage value outside 0..MaxUsage unknown, and
// reports whether it changed any. A cached count above MaxUsage is above
// the input, whatever it is, so the row's cost is unknown too (Cost).
func (s *Settlement) ForgetUnreadable() bool {
	if s.CachedInputTokens.Known && s.CachedInputTokens.V > MaxUsage {
		s.cachedAbove = true
	}
	changed := false
	for _, c := range []*Count{&s.InputTokens, &s.OutputTokens, &s.TotalTokens, &s.CachedInputTokens, &s.ReasoningTokens, &s.CostMicros} {
		r := c.readable()
		changed = changed || r != *c
		*c = r
	}
	return changed
}

// Row is one usage row as stored.
type Row struct {
	RequestID    string
	Time         time.Time
	Settled      bool
	Expires      time.Time
	Operation    string
	Pool         string
	Model        string
	Credential   string
	Region       string
	Client       string
	Attempts     int
	Status       int
	ErrorCode    string
	InputTokens  Count
	OutputTokens Count
	TotalTokens  Count
	// CachedInputTokens and ReasoningTokens are unknown when the provider
	// did not report them.
	CachedInputTokens Count
	ReasoningTokens   Count
	CostMicros        Count
	Latency           time.Duration
}

// dims is a usage row's position in the report rollup.
type dims struct {
	operation, model, credential, client string
	status                               int
}

// openRow is what the writer remembers of a reservation it wrote, so that
// settling it needs no read.
type openRow struct {
	ts, expires int64
	dim         dims
	// price is the model's price taken at admission (nil: none, or a
	// Decisions row).
	price *Price
	// reserved: this process wrote the reservation (price is the one
	// taken at admission); otherwise the row was read back.
	reserved bool
}

// delta is a change to the rollups caused by one write.
type delta struct {
	Totals
	input, output int64
	// inputUnknown and outputUnknown count the settled rows of unknown
	// input or output tokens (TokensUnknown counts those of unknown total).
	inputUnknown, outputUnknown int64
	// cached and reasoning sum the known cached-input and reasoning
	// tokens; cachedUnknown and reasoningUnknown count the settled rows
	// where they are unknown.
	cached, reasoning               int64
	cachedUnknown, reasoningUnknown int64
	errors                          int64
}

func reservationDelta() delta {
	return delta{Totals: Totals{Requests: 1, TokensUnknown: 1, CostUnknown: 1}}
}

func settlementDelta(s Settlement) delta {
	d := delta{Totals: Totals{Requests: 1}}
	d.Tokens, d.TokensUnknown = s.TotalTokens.split()
	d.CostMicros, d.CostUnknown = s.CostMicros.split()
	d.input, d.inputUnknown = s.InputTokens.split()
	d.output, d.outputUnknown = s.OutputTokens.split()
	d.cached, d.cachedUnknown = s.CachedInputTokens.split()
	d.reasoning, d.reasoningUnknown = s.ReasoningTokens.split()
	if s.Status >= 400 || s.Status == 0 || s.ErrorCode != "" {
		d.errors = 1
	}
	return d
}

// Cost is the settled row's cost under price p (CostOf): unknown, too,
// when the provider reported a cached count above every readable input.
func (s *Settlement) Cost(p *Price) Count {
	if s.cachedAbove {
		return Count{}
	}
	return CostOf(p, s.InputTokens, s.CachedInputTokens, s.OutputTokens)
}
