package conformance

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/ledger"
)

// `rotor ledger copy`: rows imported into a ledger that already has rows
// of its own, behind its rollups, keep every field; importing again adds
// nothing; windows, reports and the next admission count them; learned
// records copy once.
func testImport(t *testing.T, e Engine) {
	src, s := fresh(t, e)
	setPrice(t, s, gptPrice)
	for i := range 30 {
		id := fmt.Sprint("src-", i)
		op := []string{opChat, opChat, opDecisions}[i%3]
		src.reserve(s, id, op, "gpt")
		switch i % 5 {
		case 0: // left open
		case 1:
			settle(t, s, ledger.Settlement{RequestID: id, Model: "gpt", Credential: "key-a", Status: 502, ErrorCode: "upstream_error"})
		default:
			st := usage(id, "gpt", int64(10*i), int64(i))
			st.CachedInputTokens, st.Latency = ledger.Known(int64(i)), time.Duration(i)*time.Millisecond
			settle(t, s, st)
		}
		src.clk.Advance(11 * time.Minute)
	}
	if _, err := s.PutLearned(ctx, "scope-1", []byte("state"), 0, t0, 10, week); err != nil {
		t.Fatal(err)
	}
	srcRows := rowsOf(t, s)
	whole := ledger.Window{From: t0.Add(-time.Hour), To: src.clk.Now().Add(time.Hour)}
	part := ledger.Window{From: t0.Add(97 * time.Minute), To: t0.Add(4*time.Hour + 13*time.Minute)}

	// The destination has rows of its own, before, between and after the
	// source's, folded into its rollups by the time of the copy.
	dst := &db{t: t, e: e, addr: e.Create(t), clk: clock.NewFake(t0.Add(-30 * time.Minute))}
	if err := e.Migrate(ctx, dst.addr); err != nil {
		t.Fatal(err)
	}
	d := dst.open()
	for i := range 8 {
		id := fmt.Sprint("dst-", i)
		dst.reserve(d, id, "embeddings", "emb")
		settle(t, d, usage(id, "emb", 5, 0))
		dst.clk.Advance(47 * time.Minute)
	}
	dst.clk.Set(src.clk.Now().Add(time.Hour))
	addBudget(t, d, budgets.Budget{Name: "day", Kind: budgets.KindRequests, Limit: 38, Window: rolling(24 * time.Hour)})
	adm := budgets.NewAdmitter()
	if err := dst.admit(d, adm, "own", "embeddings", "emb"); err != nil {
		t.Fatalf("admission before the copy: %v", err)
	}
	if err := d.Release(ctx, "own"); err != nil {
		t.Fatal(err)
	}
	ownWhole, ownPart := totals(t, d, whole), totals(t, d, part)

	imp := capability[ledger.Importer](t, d)
	if n, err := imp.ImportRows(ctx, srcRows[:10]); err != nil || n != 10 {
		t.Fatalf("ImportRows of 10 rows = %d, %v", n, err)
	}
	if n, err := imp.ImportRows(ctx, srcRows); err != nil || n != len(srcRows)-10 {
		t.Fatalf("ImportRows of every row, 10 there already = %d, %v; want %d", n, err, len(srcRows)-10)
	}
	if n, err := imp.ImportRows(ctx, srcRows); err != nil || n != 0 {
		t.Errorf("ImportRows again = %d, %v; want 0", n, err)
	}
	got := rowByID(t, dst.open())
	for _, r := range srcRows {
		if !sameRow(got[r.RequestID], r) {
			t.Errorf("imported %+v\nwant     %+v", got[r.RequestID], r)
		}
	}
	if len(got) != len(srcRows)+8 {
		t.Errorf("%d rows after the copy, want %d", len(got), len(srcRows)+8)
	}
	for _, w := range []struct {
		name string
		w    ledger.Window
		own  ledger.Totals
	}{{"every row", whole, ownWhole}, {"hours apart", part, ownPart}} {
		want := totals(t, s, w.w)
		want.Requests += w.own.Requests
		want.Tokens += w.own.Tokens
		want.TokensUnknown += w.own.TokensUnknown
		want.CostMicros += w.own.CostMicros
		want.CostUnknown += w.own.CostUnknown
		if got := totals(t, d, w.w); got != want {
			t.Errorf("%s: totals after the copy = %+v, want the source's plus the destination's: %+v", w.name, got, want)
		}
	}
	for _, by := range [][]string{{ledger.KeyStatus}, {ledger.KeyModel, ledger.KeyDay}} {
		q := ledger.ReportQuery{From: whole.From, To: whole.To, By: by}
		want, err := s.Report(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := d.Report(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var gotSrc []ledger.ReportRow
		for _, r := range rep {
			if len(by) == 2 && r.Keys[0] == "emb" {
				continue
			}
			if len(by) == 1 && r.Keys[0] == "200" {
				r.Requests -= 8 // the destination's own rows
				r.InputTokens -= 40
				r.TotalTokens -= 40
				r.CostUnknown -= 8
				r.CachedUnknown -= 8
				r.ReasoningUnknown -= 8
				r.CostKnown = r.CostUnknown == 0
			}
			gotSrc = append(gotSrc, r)
		}
		sortReport(gotSrc)
		sortReport(want)
		if !sameReport(gotSrc, want) {
			t.Errorf("report by %v after the copy, less the destination's rows:%s\nwant the source's:%s", by, describeReport(gotSrc), describeReport(want))
		}
	}
	// The 30 rows copied into the last 24 hours count at the next admission.
	if err := dst.admit(d, adm, "after", "embeddings", "emb"); !errors.Is(err, budgets.ErrExceeded) {
		t.Errorf("admission after the copy filled the requests budget = %v, want ErrExceeded", err)
	}

	// Client tokens copy with their creation and last-use times, once, and
	// bind at the next read of the tokens.
	toks := []ledger.ClientToken{
		{Label: "ci", CreatedAt: t0.Add(-48 * time.Hour), LastUsed: t0.Add(-time.Hour), Hash: [32]byte{1, 2, 3}},
		{Label: "laptop", CreatedAt: t0.Add(-24 * time.Hour), Hash: [32]byte{4, 5, 6}},
	}
	// A running handle that has read its tokens already sees the copied
	// ones at its next lookup, without a restart.
	if label, ok, err := d.LookupToken(ctx, toks[0].Hash); err != nil || ok {
		t.Errorf("LookupToken before the copy = %q, %v, %v; want not found", label, ok, err)
	}
	for i, want := range []int{2, 0} {
		if n, err := imp.ImportClientTokens(ctx, toks); err != nil || n != want {
			t.Errorf("ImportClientTokens, time %d = %d, %v; want %d", i+1, n, err, want)
		}
	}
	gotToks, err := d.ClientTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gotToks) != len(toks) {
		t.Fatalf("tokens after the copy: %+v, want %+v", gotToks, toks)
	}
	for i, w := range toks {
		g := gotToks[i]
		if g.Label != w.Label || g.Hash != w.Hash || !g.CreatedAt.Equal(w.CreatedAt) || !g.LastUsed.Equal(w.LastUsed) {
			t.Errorf("token %d after the copy: %+v, want %+v", i, g, w)
		}
	}
	if label, ok, err := d.LookupToken(ctx, toks[0].Hash); err != nil || !ok || label != "ci" {
		t.Errorf("LookupToken of a copied token = %q, %v, %v; want ci", label, ok, err)
	}

	// Prices copy only where the target has none: one stored there since
	// the copy looked (a pricing set on the team's ledger) is kept.
	theirs := ledger.Price{Model: "gpt-shared", InputMicros: 3, OutputMicros: 4, Source: ledger.SourceSet}
	if _, err := d.PutPrices(ctx, []ledger.Price{theirs}, true); err != nil {
		t.Fatal(err)
	}
	copied := []ledger.Price{
		{Model: "gpt-shared", InputMicros: 1, OutputMicros: 2, Source: ledger.SourceSet, Updated: t0.Add(-time.Hour)},
		{Model: "gpt-new", InputMicros: 5, OutputMicros: 6, CachedInputMicros: ledger.Known(1), Source: "prices.json", Updated: t0.Add(-2 * time.Hour)},
	}
	for i, want := range []int{1, 0} {
		if n, err := imp.ImportPrices(ctx, copied); err != nil || n != want {
			t.Errorf("ImportPrices, time %d = %d, %v; want %d", i+1, n, err, want)
		}
	}
	gotPrices, err := d.Prices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := gotPrices["gpt-shared"]; g.InputMicros != 3 || g.OutputMicros != 4 {
		t.Errorf("the target's own price after ImportPrices = %+v, want it kept (3, 4)", g)
	}
	if g, w := gotPrices["gpt-new"], copied[1]; g.InputMicros != w.InputMicros || g.OutputMicros != w.OutputMicros || g.CachedInputMicros != w.CachedInputMicros ||
		g.Source != w.Source || !g.Updated.Equal(w.Updated) {
		t.Errorf("a copied price = %+v, want %+v", g, w)
	}

	recs, err := capability[ledger.Importer](t, s).LearnedRecords(ctx)
	if err != nil || len(recs) != 1 {
		t.Fatalf("LearnedRecords = %+v, %v; want one", recs, err)
	}
	for want := range []int{1, 0} {
		if n, err := imp.ImportLearned(ctx, recs, t0, 10, week); err != nil || n != 1-want {
			t.Errorf("ImportLearned, time %d = %d, %v; want %d", want+1, n, err, 1-want)
		}
	}
	if rec, ok, err := d.GetLearned(ctx, "scope-1", t0); err != nil || !ok || string(rec.State) != "state" || rec.Revision != 1 || !rec.ExpiresAt.Equal(t0.Add(week)) {
		t.Errorf("GetLearned after the copy = %+v, %v, %v", rec, ok, err)
	}
}
