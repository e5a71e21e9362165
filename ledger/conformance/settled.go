package conformance

import (
	"errors"
	"sync"
	"testing"

	"github.com/rotorhq/rotor/ledger"
)

// settleNotifier is the optional hook metrics count tokens and cost from
// (cmd/rotor/metrics_wire.go): every engine has it.
type settleNotifier interface {
	OnSettle(fn func(ledger.Settled))
}

// OnSettle tells each settlement a handle commits once, as its row holds
// it (operation, tokens, the cost the ledger computed, unknown where it
// is), and nothing of a settlement that failed or that another handle
// committed: metrics add up to the ledger's rows.
func testOnSettle(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	var mu sync.Mutex
	told := map[string][]ledger.Settled{}
	capability[settleNotifier](t, l).OnSettle(func(x ledger.Settled) {
		mu.Lock()
		told[x.RequestID] = append(told[x.RequestID], x)
		mu.Unlock()
	})
	d.reserve(l, "chat", opChat, "gpt")
	d.reserve(l, "dec", opDecisions, "gpt")
	d.reserve(l, "unpriced", opChat, "other")
	d.reserve(l, "refused", opChat, "gpt")
	d.reserve(l, "huge", opChat, "gpt")
	d.reserve(l, "open", opChat, "gpt")
	st := usage("chat", "gpt", 1000, 500)
	st.CachedInputTokens, st.ReasoningTokens = ledger.Known(100), ledger.Known(50)
	settle(t, l, st)
	settle(t, l, usage("dec", "gpt", 40, 2))
	settle(t, l, usage("unpriced", "other", 7, 3))
	settle(t, l, ledger.Settlement{RequestID: "refused", Model: "gpt", Status: 400, Refused: true})
	huge := usage("huge", "gpt", 5, 1)
	huge.OutputTokens = ledger.Known(ledger.MaxUsage + 1) // read as unknown
	settle(t, l, huge)
	// Settled twice: the second fails and tells nothing.
	if err := l.Settle(ctx, usage("chat", "gpt", 1, 1)); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("second Settle(chat) = %v, want ErrNotFound", err)
	}
	// Another handle's settlement is its own.
	other := d.open()
	d.reserve(other, "elsewhere", opChat, "gpt")
	settle(t, other, usage("elsewhere", "gpt", 1, 1))

	mu.Lock()
	defer mu.Unlock()
	rows := rowByID(t, l)
	for _, id := range []string{"chat", "dec", "unpriced", "refused", "huge"} {
		r := rows[id]
		got := told[id]
		if len(got) != 1 {
			t.Errorf("%s: OnSettle told %d times, want once", id, len(got))
			continue
		}
		x := got[0]
		if x.Operation != r.Operation || x.InputTokens != r.InputTokens || x.OutputTokens != r.OutputTokens || x.TotalTokens != r.TotalTokens ||
			x.CachedInputTokens != r.CachedInputTokens || x.ReasoningTokens != r.ReasoningTokens || x.CostMicros != r.CostMicros {
			t.Errorf("%s: OnSettle told %+v\nthe row holds %s", id, x, describeRow(r))
		}
	}
	if c := told["chat"]; len(c) == 1 && c[0].CostMicros != ledger.Known(2000) {
		t.Errorf("chat: told cost %+v, want the ledger's 2000 micro-USD (1000 in + 2 x 500 out)", c[0].CostMicros)
	}
	if h := told["huge"]; len(h) == 1 && h[0].OutputTokens.Known {
		t.Errorf("huge: told output %+v, want unknown (outside 0..MaxUsage), as the row", h[0].OutputTokens)
	}
	for _, id := range []string{"open", "elsewhere"} {
		if len(told[id]) != 0 {
			t.Errorf("%s: OnSettle told %+v, want nothing (not settled by this handle)", id, told[id])
		}
	}
}
