package decisions

import (
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/jsonobj"
	"github.com/rotorhq/rotor/ledger"
)

// settleUsage puts the usage an answer reported into its row; a count the
// answer did not report stays unknown. The ledger computes the cost from
// the price taken at admission.
func settleUsage(st *ledger.Settlement, u jsonobj.Usage) {
	for _, f := range []struct {
		dst *ledger.Count
		v   *int64
	}{{&st.InputTokens, u.Input}, {&st.OutputTokens, u.Output}, {&st.TotalTokens, u.Total},
		{&st.CachedInputTokens, u.Cached}, {&st.ReasoningTokens, u.Reasoning}} {
		if f.v != nil {
			*f.dst = ledger.Known(*f.v)
		}
	}
}

// settleRefused records a request the provider refused with a structured
// 4xx: providers do not bill it, so the ledger records 0 tokens and 0
// cost, not unknown.
func settleRefused(st *ledger.Settlement) { st.Refused = true }

// noteTokens puts the row's token counts in the access line.
func noteTokens(info *httpx.AccessInfo, st ledger.Settlement) {
	for _, f := range []struct {
		dst **int64
		c   ledger.Count
	}{{&info.InputTokens, st.InputTokens}, {&info.OutputTokens, st.OutputTokens}, {&info.TotalTokens, st.TotalTokens}} {
		if f.c.Known || st.Refused {
			v := f.c.V // a refused request records 0
			*f.dst = &v
		}
	}
}
