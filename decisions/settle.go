package decisions

import "github.com/rotorhq/rotor/ledger"

// settleUsage puts the usage an answer reported into its row; a count the
// answer did not report stays unknown.
func settleUsage(st *ledger.Settlement, u Usage) {
	for _, f := range []struct {
		dst *ledger.Count
		v   *int64
	}{{&st.InputTokens, u.Input}, {&st.OutputTokens, u.Output}, {&st.TotalTokens, u.Total}} {
		if f.v != nil {
			*f.dst = ledger.Known(*f.v)
		}
	}
}

// settleRefused records a request the provider refused with a structured
// 4xx: providers do not bill it, so its usage is zero, not unknown.
func settleRefused(st *ledger.Settlement) {
	zero := int64(0)
	settleUsage(st, Usage{Input: &zero, Output: &zero, Total: &zero})
}
