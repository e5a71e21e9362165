package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
)

// Budgets: add, a taken name refused with ErrExists and unchanged, replace,
// list by name, remove, a missing name ErrNotFound.
func testBudgetsCRUD(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	daily := ledger.BudgetRecord{Name: "daily", Kind: "tokens", Limit: 100, Window: "day"}
	if err := l.PutBudget(ctx, daily, false); err != nil {
		t.Fatal(err)
	}
	if err := l.PutBudget(ctx, ledger.BudgetRecord{Name: "an-hour", Kind: "requests", Limit: 5, Window: "1h", CreatedAt: t0.Add(-time.Hour)}, false); err != nil {
		t.Fatal(err)
	}
	changed := daily
	changed.Limit = 999
	if err := l.PutBudget(ctx, changed, false); !errors.Is(err, ledger.ErrExists) {
		t.Errorf("a taken name without replace = %v, want ErrExists", err)
	}
	bs, err := d.open().Budgets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.BudgetRecord{
		{Name: "an-hour", Kind: "requests", Limit: 5, Window: "1h", CreatedAt: t0.Add(-time.Hour)},
		{Name: "daily", Kind: "tokens", Limit: 100, Window: "day", CreatedAt: t0},
	}
	if !sameBudgets(bs, want) {
		t.Errorf("budgets = %+v, want %+v (by name; created at the clock's time unless given)", bs, want)
	}
	d.clk.Advance(time.Minute)
	changed.Kind, changed.Window = "cost", "7d"
	if err := l.PutBudget(ctx, changed, true); err != nil {
		t.Fatalf("replace: %v", err)
	}
	bs, _ = l.Budgets(ctx)
	want[1] = ledger.BudgetRecord{Name: "daily", Kind: "cost", Limit: 999, Window: "7d", CreatedAt: t0.Add(time.Minute)}
	if !sameBudgets(bs, want) {
		t.Errorf("budgets after replace = %+v, want %+v", bs, want)
	}
	if err := l.RemoveBudget(ctx, "daily"); err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveBudget(ctx, "daily"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("removing twice = %v, want ErrNotFound", err)
	}
	if bs, _ := l.Budgets(ctx); !sameBudgets(bs, want[:1]) {
		t.Errorf("budgets after remove = %+v, want %+v", bs, want[:1])
	}
}

func sameBudgets(a, b []ledger.BudgetRecord) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Name != y.Name || x.Kind != y.Kind || x.Limit != y.Limit || x.Window != y.Window || !x.CreatedAt.Equal(y.CreatedAt) {
			return false
		}
	}
	return true
}

// A budget added, replaced or removed through another process binds this
// process's next admission (the change counter), with no reopen.
func testChangeCounter(t *testing.T, e Engine) {
	d, a := fresh(t, e)
	b := d.open()
	adm := budgets.NewAdmitter()
	if err := d.admit(a, adm, "first", opDecisions, "m"); err != nil {
		t.Fatalf("first admission: %v", err)
	}
	addBudget(t, b, budgets.Budget{Name: "one", Kind: budgets.KindRequests, Limit: 1, Window: calendar("day")})
	if err := d.admit(a, adm, "second", opDecisions, "m"); !errors.Is(err, budgets.ErrExceeded) {
		t.Fatalf("admission after another handle added a used-up budget = %v, want ErrExceeded", err)
	}
	if err := b.PutBudget(ctx, budgets.Budget{Name: "one", Kind: budgets.KindRequests, Limit: 2, Window: calendar("day")}.Record(), true); err != nil {
		t.Fatal(err)
	}
	if err := d.admit(a, adm, "third", opDecisions, "m"); err != nil {
		t.Fatalf("admission after another handle raised the limit: %v", err)
	}
	addBudget(t, b, budgets.Budget{Name: "usd", Kind: budgets.KindCost, Limit: 1, Window: calendar("day")})
	if err := d.admit(a, adm, "fourth", opDecisions, "m"); !errors.Is(err, budgets.ErrPolicyBlocked) {
		t.Fatalf("Decisions after another handle added a cost budget = %v, want ErrPolicyBlocked", err)
	}
	for _, n := range []string{"usd", "one"} {
		if err := b.RemoveBudget(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.admit(a, adm, "fifth", opDecisions, "m"); err != nil {
		t.Fatalf("admission after another handle removed the budgets: %v", err)
	}
}

var (
	hashA = [32]byte{1, 2, 3}
	hashB = [32]byte{4, 5, 6}
)

// Client tokens: add, a taken label ErrExists, replace (the old hash stops
// working, the last use is forgotten), lookup, list by label without the hash, revoke, a missing
// label ErrNotFound.
func testTokensCRUD(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	if err := l.AddClientToken(ctx, "ci", hashA, false); err != nil {
		t.Fatal(err)
	}
	if err := l.AddClientToken(ctx, "ci", hashB, false); !errors.Is(err, ledger.ErrExists) {
		t.Errorf("a taken label = %v, want ErrExists", err)
	}
	// LookupTokenCached may answer from a list loaded a moment ago (a
	// revoked token until the next admission, see
	// TokenRevokedThroughAnotherHandleRefusedAtNextAdmission); LookupToken
	// is exact.
	lookup := func(l ledger.Ledger, h [32]byte, wantLabel string, wantOK bool) {
		t.Helper()
		label, ok, err := l.LookupToken(ctx, h)
		if err != nil || ok != wantOK || label != wantLabel {
			t.Errorf("LookupToken(%x) = %q, %v, %v; want %q, %v", h[:3], label, ok, err, wantLabel, wantOK)
		}
	}
	if label, ok, err := l.LookupTokenCached(ctx, hashA); err != nil || !ok || label != "ci" {
		t.Errorf("LookupTokenCached of a new token = %q, %v, %v; want ci", label, ok, err)
	}
	lookup(l, hashA, "ci", true)
	lookup(l, hashB, "", false)
	// The old token's last use is not the replacement's: a replaced
	// token lists as never used.
	if err := l.TouchTokens(ctx, map[string]time.Time{"ci": t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	d.clk.Advance(time.Minute)
	if err := l.AddClientToken(ctx, "ci", hashB, true); err != nil {
		t.Fatalf("replace: %v", err)
	}
	if err := l.AddClientToken(ctx, "another", hashA, false); err != nil {
		t.Fatal(err)
	}
	lookup(l, hashB, "ci", true)
	lookup(l, hashA, "another", true)
	toks, err := l.ClientTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 2 || toks[0].Label != "another" || toks[1].Label != "ci" || !toks[1].CreatedAt.Equal(t0.Add(time.Minute)) || !toks[1].LastUsed.IsZero() {
		t.Errorf("tokens = %+v, want another and ci by label, ci created at %v (replaced), never used", toks, t0.Add(time.Minute))
	}
	if err := l.RevokeClientToken(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	lookup(l, hashB, "", false)
	if err := l.RevokeClientToken(ctx, "ci"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("revoking twice = %v, want ErrNotFound", err)
	}
	if toks, _ := l.ClientTokens(ctx); len(toks) != 1 || toks[0].Label != "another" {
		t.Errorf("tokens after revoke = %+v, want another alone", toks)
	}
}

// A token revoked through another process stops at this process's next
// lookup, and at its next admission even when the front door answered
// from a cached list; a token added elsewhere is found at once.
func testTokenRevokedElsewhere(t *testing.T, e Engine) {
	d, a := fresh(t, e)
	b := d.open()
	if err := a.AddClientToken(ctx, "ci", hashA, false); err != nil {
		t.Fatal(err)
	}
	res := func(id string) ledger.Reservation {
		return ledger.Reservation{RequestID: id, Operation: opDecisions, Token: hashA, CheckToken: true, Expires: t0.Add(time.Hour)}
	}
	if label, ok, err := a.LookupTokenCached(ctx, hashA); err != nil || !ok || label != "ci" {
		t.Fatalf("LookupTokenCached = %q, %v, %v", label, ok, err)
	}
	if err := a.Reserve(ctx, res("before"), nil); err != nil {
		t.Fatalf("reservation with a stored token: %v", err)
	}
	if err := b.RevokeClientToken(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if err := a.Reserve(ctx, res("after"), nil); !errors.Is(err, ledger.ErrTokenRevoked) {
		t.Errorf("reservation after another handle revoked the token = %v, want ErrTokenRevoked", err)
	}
	if label, ok, err := a.LookupToken(ctx, hashA); err != nil || ok {
		t.Errorf("LookupToken after the revocation = %q, %v, %v; want not found", label, ok, err)
	}
	if label, ok, err := a.LookupTokenCached(ctx, hashA); err != nil || ok {
		t.Errorf("LookupTokenCached after admission saw the revocation = %q, %v, %v; want not found", label, ok, err)
	}
	if got := ids(rowsOf(t, a)); len(got) != 1 || got[0] != "before" {
		t.Errorf("rows = %v, want before alone", got)
	}
	if err := b.AddClientToken(ctx, "new", hashB, false); err != nil {
		t.Fatal(err)
	}
	if label, ok, err := a.LookupTokenCached(ctx, hashB); err != nil || !ok || label != "new" {
		t.Errorf("LookupTokenCached of a token added elsewhere = %q, %v, %v; want new", label, ok, err)
	}
}

// TouchTokens records the latest use per label, never moving it back.
func testTouchTokens(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	if err := l.AddClientToken(ctx, "ci", hashA, false); err != nil {
		t.Fatal(err)
	}
	late, early := t0.Add(2*time.Hour), t0.Add(time.Hour)
	if err := l.TouchTokens(ctx, map[string]time.Time{"ci": late}); err != nil {
		t.Fatal(err)
	}
	if err := d.open().TouchTokens(ctx, map[string]time.Time{"ci": early, "gone": early}); err != nil {
		t.Fatal(err)
	}
	toks, err := l.ClientTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 1 || !toks[0].LastUsed.Equal(late) {
		t.Errorf("tokens = %+v, want ci last used at %v", toks, late)
	}
}

// Prices: put (counted), an import never overwrites a price set by hand
// unless replace, list, remove, a missing model ErrNotFound, an invalid
// price refused with nothing written.
func testPricesCRUD(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	n, err := l.PutPrices(ctx, []ledger.Price{
		{Model: "gpt", InputMicros: 150_000, OutputMicros: 600_000, Source: ledger.SourceSet},
		{Model: "emb", InputMicros: 20_000, CachedInputMicros: ledger.Known(10_000), Source: "prices.json"},
	}, false)
	if err != nil || n != 2 {
		t.Fatalf("PutPrices = %d, %v; want 2", n, err)
	}
	d.clk.Advance(time.Minute)
	imported := []ledger.Price{
		{Model: "gpt", InputMicros: 1, OutputMicros: 1, Source: "prices.json"},
		{Model: "emb", InputMicros: 30_000, Source: "prices.json"},
	}
	if n, err := l.PutPrices(ctx, imported, false); err != nil || n != 1 {
		t.Errorf("import over a price set by hand = %d, %v; want 1 (emb), gpt kept", n, err)
	}
	ps, err := d.open().Prices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ledger.Price{
		"gpt": {Model: "gpt", InputMicros: 150_000, OutputMicros: 600_000, Source: ledger.SourceSet, Updated: t0},
		"emb": {Model: "emb", InputMicros: 30_000, Source: "prices.json", Updated: t0.Add(time.Minute)},
	}
	checkPrices(t, ps, want)
	if n, err := l.PutPrices(ctx, imported[:1], true); err != nil || n != 1 {
		t.Errorf("import with replace = %d, %v; want 1", n, err)
	}
	want["gpt"] = ledger.Price{Model: "gpt", InputMicros: 1, OutputMicros: 1, Source: "prices.json", Updated: t0.Add(time.Minute)}
	if _, err := l.PutPrices(ctx, []ledger.Price{{Model: "emb", InputMicros: -1, Source: ledger.SourceSet}, {Model: "new", InputMicros: 1, Source: ledger.SourceSet}}, true); err == nil {
		t.Error("a negative price was accepted")
	}
	ps, _ = l.Prices(ctx)
	checkPrices(t, ps, want)
	if err := l.RemovePrice(ctx, "gpt"); err != nil {
		t.Fatal(err)
	}
	if err := l.RemovePrice(ctx, "gpt"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("removing twice = %v, want ErrNotFound", err)
	}
	delete(want, "gpt")
	ps, _ = l.Prices(ctx)
	checkPrices(t, ps, want)
}

func checkPrices(t *testing.T, got, want map[string]ledger.Price) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("prices = %+v, want %+v", got, want)
		return
	}
	for m, w := range want {
		g := got[m]
		if g.Model != w.Model || g.InputMicros != w.InputMicros || g.OutputMicros != w.OutputMicros || g.CachedInputMicros != w.CachedInputMicros ||
			g.Source != w.Source || !g.Updated.Equal(w.Updated) {
			t.Errorf("price of %s = %+v, want %+v", m, g, w)
		}
	}
}

// A row's cost is computed once, at settlement, from the price taken at
// admission: round half up of (uncached input x input price + cached x
// cached price + output x output price) / 10^6, in micro-USD.
func testCostAtAdmission(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	setPrice(t, l, ledger.Price{Model: "gpt", InputMicros: 2_500_000, CachedInputMicros: ledger.Known(1_250_000), OutputMicros: 10_000_000, Source: ledger.SourceSet})
	for _, id := range []string{"mixed", "half", "below", "cached-above"} {
		d.reserve(l, id, opChat, "gpt")
	}
	// Changed while they are in flight: they keep the admission's price.
	setPrice(t, l, ledger.Price{Model: "gpt", InputMicros: 9_000_000, OutputMicros: 9_000_000, Source: ledger.SourceSet})
	with := func(id string, in, cached, out int64) ledger.Settlement {
		s := usage(id, "gpt", in, out)
		s.CachedInputTokens = ledger.Known(cached)
		return s
	}
	settle(t, l, with("mixed", 1000, 200, 100)) // 800 x 2.5 + 200 x 1.25 + 100 x 10 = 3250
	settle(t, l, with("half", 1, 0, 0))         // 2.5 -> 3
	settle(t, l, with("below", 1, 1, 0))        // 1.25 -> 1
	settle(t, l, with("cached-above", 1, 2, 0)) // unknown
	d.reserve(l, "new-price", opChat, "gpt")
	settle(t, l, with("new-price", 1000, 0, 1000)) // 9000 + 9000
	want := map[string]ledger.Count{"mixed": ledger.Known(3250), "half": ledger.Known(3), "below": ledger.Known(1), "cached-above": {}, "new-price": ledger.Known(18000)}
	got := rowByID(t, l)
	for _, id := range sortedKeys(want) {
		if got[id].CostMicros != want[id] {
			t.Errorf("%s: cost %+v, want %+v", id, got[id].CostMicros, want[id])
		}
	}
}

// A price set or removed through another process binds this process's
// next admission: the row's cost comes from it.
func testPriceElsewhere(t *testing.T, e Engine) {
	d, a := fresh(t, e)
	cli := d.open()
	run := func(id string) ledger.Count {
		t.Helper()
		d.reserve(a, id, opChat, "emb")
		settle(t, a, usage(id, "emb", 1000, 0))
		return rowByID(t, a)[id].CostMicros
	}
	if c := run("a"); c.Known {
		t.Errorf("cost before any price = %+v, want unknown", c)
	}
	setPrice(t, cli, ledger.Price{Model: "emb", InputMicros: 20_000_000, Source: "prices.json"})
	if c := run("b"); c != ledger.Known(20_000) {
		t.Errorf("cost after another handle set a price = %+v, want 20000", c)
	}
	setPrice(t, cli, ledger.Price{Model: "emb", InputMicros: 30_000_000, Source: ledger.SourceSet})
	if c := run("c"); c != ledger.Known(30_000) {
		t.Errorf("cost after another handle changed the price = %+v, want 30000", c)
	}
	if err := cli.RemovePrice(ctx, "emb"); err != nil {
		t.Fatal(err)
	}
	if c := run("d"); c.Known {
		t.Errorf("cost after another handle removed the price = %+v, want unknown", c)
	}
}
