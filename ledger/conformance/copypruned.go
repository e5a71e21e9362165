package conformance

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/ledger"
)

// `rotor ledger copy` of a pruned ledger: the usage the prune deleted from
// the rows, carried with the rows that are left, reads the same on the
// target: every report and budget window over pruned time, on a new
// handle too. A second copy adds nothing; a target with usage of its own
// before the cut refuses it and stays as it was.
func testImportPruned(t *testing.T, e Engine) {
	d, l, day0 := pruneTraffic(t, e)
	edge := rowNear(t, l, day0).Add(-time.Millisecond)
	want := d.readAll(l, day0, edge)
	cut := day0.Add(3 * 24 * time.Hour)
	res, err := capability[ledger.Pruner](t, l).Prune(ctx, ledger.PruneRequest{Before: cut})
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	pu, err := capability[ledger.Importer](t, l).PrunedUsage(ctx)
	if err != nil {
		t.Fatalf("PrunedUsage: %v", err)
	}
	if !pu.Until.Equal(cut) || pu.Requests() != res.Deleted || len(pu.Hours) == 0 {
		t.Fatalf("PrunedUsage = until %v, %d requests in %d minutes, %d hours; want until %v, the %d requests pruned",
			pu.Until, pu.Requests(), len(pu.Minutes), len(pu.Hours), cut, res.Deleted)
	}
	rows := rowsOf(t, l)

	dst := &db{t: t, e: e, addr: e.Create(t), clk: clock.NewFake(d.clk.Now())}
	if err := e.Migrate(ctx, dst.addr); err != nil {
		t.Fatal(err)
	}
	dl := dst.open()
	imp := capability[ledger.Importer](t, dl)
	if n, err := imp.ImportPruned(ctx, pu); err != nil || n != res.Deleted {
		t.Fatalf("ImportPruned = %d, %v; want the %d requests pruned", n, err, res.Deleted)
	}
	if n, err := imp.ImportRows(ctx, rows); err != nil || n != len(rows) {
		t.Fatalf("ImportRows = %d, %v; want %d", n, err, len(rows))
	}
	check := func(when string, l ledger.Ledger) {
		t.Helper()
		got := dst.readAll(l, day0, edge)
		for i := range want.reports {
			if !sameReport(got.reports[i], want.reports[i]) {
				t.Errorf("%s: report %d\ngot  %s\nwant %s", when, i, describeReport(got.reports[i]), describeReport(want.reports[i]))
			}
		}
		if !reflect.DeepEqual(got.totals, want.totals) || got.admitted != want.admitted {
			t.Errorf("%s: windows %+v, at admission %+v\nwant %+v, %+v", when, got.totals, got.admitted, want.totals, want.admitted)
		}
	}
	check("after the copy", dl)
	check("after the copy, another handle", dst.open())
	if at, err := capability[ledger.Pruner](t, dl).PrunedUntil(ctx); err != nil || !at.Equal(cut) {
		t.Errorf("target's PrunedUntil = %v, %v; want the source's cut %v", at, err, cut)
	}

	// A second copy: the target's pruned usage is the source's; nothing
	// is added.
	if got, err := imp.PrunedUsage(ctx); err != nil || !got.Equal(pu) {
		t.Errorf("target's PrunedUsage = %d requests until %v, %v; want the source's %d until %v", got.Requests(), got.Until, err, pu.Requests(), pu.Until)
	}
	if n, err := imp.ImportPruned(ctx, pu); err != nil || n != 0 {
		t.Errorf("ImportPruned again = %d, %v; want 0", n, err)
	}
	if n, err := imp.ImportRows(ctx, rows); err != nil || n != 0 {
		t.Errorf("ImportRows again = %d, %v; want 0", n, err)
	}
	check("after a second copy", dst.open())

	// A target holding a row of its own before the cut: refused, nothing
	// written.
	own := &db{t: t, e: e, addr: e.Create(t), clk: clock.NewFake(day0.Add(36 * time.Hour))}
	if err := e.Migrate(ctx, own.addr); err != nil {
		t.Fatal(err)
	}
	ol := own.open()
	own.reserve(ol, "own-1", opChat, "gpt")
	settle(t, ol, usage("own-1", "gpt", 3, 4))
	own.clk.Set(d.clk.Now())
	all := ledger.ReportQuery{From: day0.Add(-24 * time.Hour), To: own.clk.Now(), By: []string{ledger.KeyDay, ledger.KeyModel}}
	whole := ledger.Window{From: all.From, To: all.To}
	wantRep, err := ol.Report(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	wantTot := totals(t, ol, whole)
	if n, err := capability[ledger.Importer](t, ol).ImportPruned(ctx, pu); !errors.Is(err, ledger.ErrPrunedOverlap) || n != 0 {
		t.Errorf("ImportPruned into a ledger with a row before the cut = %d, %v; want ErrPrunedOverlap", n, err)
	}
	ol = own.open()
	if at, err := capability[ledger.Pruner](t, ol).PrunedUntil(ctx); err != nil || !at.IsZero() {
		t.Errorf("after a refused ImportPruned, PrunedUntil = %v, %v; want zero", at, err)
	}
	if got, err := ol.Report(ctx, all); err != nil || !sameReport(got, wantRep) {
		t.Errorf("after a refused ImportPruned, report %s, %v; want %s", describeReport(got), err, describeReport(wantRep))
	}
	if got := totals(t, ol, whole); got != wantTot {
		t.Errorf("after a refused ImportPruned, window %+v; want %+v", got, wantTot)
	}
}

// A row in the first minute after the cut is not pruned usage: `rotor
// ledger copy` carries it as a row, once, and the target's windows and
// reports over the cut read what the source's do.
func testImportPrunedCutMinute(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	cut := t0.Truncate(time.Hour).Add(time.Hour)
	d.clk.Set(cut.Add(-30 * time.Minute))
	d.reserve(l, "before", opChat, "gpt")
	settle(t, l, usage("before", "gpt", 1, 1))
	d.clk.Set(cut.Add(20 * time.Second))
	d.reserve(l, "after", opChat, "gpt")
	settle(t, l, usage("after", "gpt", 2, 2))
	d.clk.Set(cut.Add(2 * time.Hour))
	res, err := capability[ledger.Pruner](t, l).Prune(ctx, ledger.PruneRequest{Before: cut})
	if err != nil || res.Deleted != 1 || !res.Until.Equal(cut) {
		t.Fatalf("Prune(before %v) = %+v, %v; want the row before it deleted", cut, res, err)
	}
	pu, err := capability[ledger.Importer](t, l).PrunedUsage(ctx)
	if err != nil || pu.Requests() != 1 {
		t.Fatalf("PrunedUsage = %d requests, %v; want the 1 pruned, not the row after the cut", pu.Requests(), err)
	}
	dst := &db{t: t, e: e, addr: e.Create(t), clk: clock.NewFake(d.clk.Now())}
	if err := e.Migrate(ctx, dst.addr); err != nil {
		t.Fatal(err)
	}
	dl := dst.open()
	imp := capability[ledger.Importer](t, dl)
	if _, err := imp.ImportPruned(ctx, pu); err != nil {
		t.Fatalf("ImportPruned: %v", err)
	}
	if n, err := imp.ImportRows(ctx, rowsOf(t, l)); err != nil || n != 1 {
		t.Fatalf("ImportRows = %d, %v; want the row after the cut", n, err)
	}
	w := ledger.Window{From: cut.Add(-time.Hour), To: d.clk.Now().Add(time.Millisecond)}
	want := ledger.Totals{Requests: 2, Tokens: 6}
	for name, h := range map[string]ledger.Ledger{"source": l, "target": dl} {
		if got := totals(t, h, w); got.Requests != want.Requests || got.Tokens != want.Tokens {
			t.Errorf("%s: window over the cut = %+v, want %d requests, %d tokens", name, got, want.Requests, want.Tokens)
		}
		rep, err := h.Report(ctx, ledger.ReportQuery{From: w.From, To: w.To})
		if err != nil || len(rep) != 1 || rep[0].Requests != 2 || rep[0].TotalTokens != 6 {
			t.Errorf("%s: report over the cut = %s, %v; want 2 requests, 6 tokens", name, describeReport(rep), err)
		}
	}
}
