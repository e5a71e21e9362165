package main

import (
	"github.com/rotorhq/rotor/gateway"
	"github.com/rotorhq/rotor/ledger"
)

// settleNotifier is a ledger that tells of each settlement it commits
// (both engines do: *ledger.Store and *pgledger.Store; the conformance
// suite checks it).
type settleNotifier interface {
	OnSettle(fn func(ledger.Settled))
}

// watchServing fills the metrics a serving process exports beside the
// route's events: rotor_build_info, and the tokens and known cost of each
// row the ledger settles, so that they add up to the ledger's rows.
func watchServing(m *gateway.Metrics, store ledger.Ledger) {
	b := readBuildInfo()
	m.SetBuildInfo(b.Version, b.Revision)
	if n, ok := store.(settleNotifier); ok {
		n.OnSettle(func(s ledger.Settled) { m.Settled(usageOf(s)) })
	}
}

// usageOf is a settled row's known counts (nil where unknown).
func usageOf(s ledger.Settled) gateway.Usage {
	known := func(c ledger.Count) *int64 {
		if !c.Known {
			return nil
		}
		v := c.V
		return &v
	}
	return gateway.Usage{Operation: s.Operation, Input: known(s.InputTokens), Output: known(s.OutputTokens),
		Cached: known(s.CachedInputTokens), Reasoning: known(s.ReasoningTokens), CostMicros: known(s.CostMicros)}
}
