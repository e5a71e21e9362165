package conformance

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
)

// Pruning (DESIGN "Ledger care"; `rotor ledger prune`): the settled rows
// before the cut go, the rollups stay, so that reports and budget windows
// over pruned time answer as before, on both engines.

// pruner is l's ledger.Pruner: every engine prunes.
func pruner(t *testing.T, l ledger.Ledger) ledger.Pruner {
	t.Helper()
	if c, ok := l.(*closeOnce); ok {
		l = c.Ledger
	}
	p, ok := l.(ledger.Pruner)
	if !ok {
		t.Fatalf("%T does not implement ledger.Pruner: this engine does not prune", l)
	}
	return p
}

// pruneTraffic writes five days of traffic from day0 (operations, models
// priced and not, credentials, clients, statuses, unknown tokens, one
// reservation never settled, r7), then moves the clock to day 6 and writes
// once more (so that SQLite's fold catches up).
func pruneTraffic(t *testing.T, e Engine) (*db, ledger.Ledger, time.Time) {
	t.Helper()
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	day0 := t0.Truncate(24 * time.Hour).Add(24 * time.Hour)
	d.clk.Set(day0.Add(23*time.Second + 117*time.Millisecond))
	for i := 0; d.clk.Now().Before(day0.Add(5 * 24 * time.Hour)); i++ {
		id := fmt.Sprint("r", i)
		model := []string{"gpt", "m-large", "m-mini"}[i%3]
		op := opChat
		if i%4 == 0 {
			op = opDecisions
		}
		r := ledger.Reservation{RequestID: id, Operation: op, Pool: "api", Model: model, Client: []string{"ci", "dev"}[i%2], Expires: d.clk.Now().Add(time.Minute)}
		if err := l.Reserve(ctx, r, nil); err != nil {
			t.Fatalf("Reserve(%s): %v", id, err)
		}
		if i != 7 { // r7 is left open, as by a rotor that died
			st := usage(id, model, int64(10*i), int64(i))
			st.Credential = []string{"team-a", "team-b", "team-c"}[i%3]
			st.Latency = time.Duration(i) * time.Millisecond
			if i%11 == 0 {
				st.Status, st.ErrorCode = 429, "rate_limit_exceeded"
			}
			if i%13 == 0 {
				st.InputTokens, st.OutputTokens, st.TotalTokens = ledger.Count{}, ledger.Count{}, ledger.Count{}
			}
			settle(t, l, st)
		}
		d.clk.Advance(29*time.Minute + 3*time.Second + 251*time.Millisecond)
	}
	d.clk.Set(day0.Add(6*24*time.Hour + 5*time.Minute))
	d.reserve(l, "last", opChat, "gpt")
	settle(t, l, usage("last", "gpt", 5, 1))
	return d, l, day0
}

// rowNear returns the time of a row of day 1 at least 31 s into its
// minute (one row a minute at most): a time just before it makes a window
// start read that minute's rows raw, which pruning deletes.
func rowNear(t *testing.T, l ledger.Ledger, day0 time.Time) time.Time {
	t.Helper()
	rows, err := l.Rows(ctx, day0.Add(24*time.Hour), day0.Add(2*24*time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Time.Second() >= 31 {
			return r.Time
		}
	}
	t.Fatal("no row late in its minute on day 1")
	return time.Time{}
}

// pruneReads is every read that must not change when rows are pruned.
type pruneReads struct {
	reports [][]ledger.ReportRow
	totals  []ledger.Totals
	// admitted is a window read at admission, as a budget added later
	// is.
	admitted ledger.Totals
}

func (d *db) readAll(l ledger.Ledger, day0, edge time.Time) pruneReads {
	t := d.t
	t.Helper()
	var r pruneReads
	for _, q := range []ledger.ReportQuery{
		{From: day0, To: day0.Add(6 * 24 * time.Hour), By: []string{ledger.KeyDay}},
		{From: day0, To: day0.Add(7 * 24 * time.Hour), By: []string{ledger.KeyModel, ledger.KeyDay, ledger.KeyStatus}},
		{From: day0.Add(24 * time.Hour), To: day0.Add(3 * 24 * time.Hour), By: []string{ledger.KeyCredential, ledger.KeyClient, ledger.KeyOperation}},
	} {
		rows, err := l.Report(ctx, q)
		if err != nil {
			t.Fatalf("Report: %v", err)
		}
		r.reports = append(r.reports, rows)
	}
	now := d.clk.Now()
	end := now.Add(time.Millisecond)
	for _, from := range []time.Time{day0, day0.Add(30*time.Hour + 7*time.Minute), day0.Add(2*24*time.Hour - 3*time.Minute), day0.Add(4 * 24 * time.Hour), edge} {
		r.totals = append(r.totals, totals(t, l, ledger.Window{From: from, To: end}))
	}
	err := l.Reserve(ctx, ledger.Reservation{RequestID: fmt.Sprint("probe-", now.UnixNano()), Operation: opDecisions, Expires: now.Add(time.Minute)},
		admitFunc(func(w ledger.WindowReader, _ ledger.Reservation) error {
			var err error
			if r.admitted, err = w.Totals(ledger.Window{From: edge, To: end}); err != nil {
				return err
			}
			return errProbe
		}))
	if !errors.Is(err, errProbe) {
		t.Fatalf("probe admission: %v", err)
	}
	return r
}

var errProbe = errors.New("probe only")

func testPruneKeepsReads(t *testing.T, e Engine) {
	d, l, day0 := pruneTraffic(t, e)
	edge := rowNear(t, l, day0).Add(-time.Millisecond)
	before := d.readAll(l, day0, edge)
	// A report whose range starts inside pruned time counts that whole
	// hour (the rollups' bucket there).
	edgeQ := ledger.ReportQuery{From: edge, To: day0.Add(4 * 24 * time.Hour), By: []string{ledger.KeyDay, ledger.KeyModel}}
	wantEdge, err := l.Report(ctx, ledger.ReportQuery{From: edge.Truncate(time.Hour), To: edgeQ.To, By: edgeQ.By})
	if err != nil {
		t.Fatal(err)
	}
	all := rowsOf(t, l)
	cut := day0.Add(3 * 24 * time.Hour)
	var settledBefore int64
	for _, r := range all {
		if r.Time.Before(cut) && r.Settled {
			settledBefore++
		}
	}

	res, err := pruner(t, l).Prune(ctx, ledger.PruneRequest{Before: cut})
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	left, err := l.Rows(ctx, day0, cut, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != settledBefore || !res.Until.Equal(cut) || res.KeptUnsettled != 1 || len(left) != 1 || left[0].RequestID != "r7" {
		t.Fatalf("Prune = %+v, rows left before the cut %v: want the %d settled rows before %v deleted and r7 (unsettled) kept",
			res, ids(left), settledBefore, cut)
	}
	if got := rowsOf(t, l); len(got) != len(all)-int(res.Deleted) {
		t.Errorf("rows after prune: %d, want %d of %d", len(got), len(all)-int(res.Deleted), len(all))
	}
	after := d.readAll(l, day0, edge)
	if got, err := l.Report(ctx, edgeQ); err != nil || !sameReport(got, wantEdge) {
		t.Errorf("report from %v inside pruned time = %v, %v; want its whole hour's %v", edge, describeReport(got), err, describeReport(wantEdge))
	}
	for i := range before.reports {
		if !sameReport(before.reports[i], after.reports[i]) {
			t.Errorf("report %d changed by prune:\nbefore %s\nafter  %s", i, describeReport(before.reports[i]), describeReport(after.reports[i]))
		}
	}
	if !reflect.DeepEqual(before.totals, after.totals) {
		t.Errorf("window totals changed by prune:\nbefore %+v\nafter  %+v", before.totals, after.totals)
	}
	if before.admitted != after.admitted || after.admitted.Requests == 0 {
		t.Errorf("a window read at admission: %+v before prune, %+v after", before.admitted, after.admitted)
	}
	// Another handle (another process) reads the same.
	if got := d.readAll(d.open(), day0, edge); !reflect.DeepEqual(before.totals, got.totals) || before.admitted != got.admitted {
		t.Errorf("another handle reads other windows after prune: %+v %+v, want %+v %+v", got.totals, got.admitted, before.totals, before.admitted)
	} else {
		for i := range before.reports {
			if !sameReport(before.reports[i], got.reports[i]) {
				t.Errorf("another handle's report %d after prune: %s, want %s", i, describeReport(got.reports[i]), describeReport(before.reports[i]))
			}
		}
	}
	// The row kept open still settles, and the reads follow it.
	settle(t, l, usage("r7", "gpt", 70, 7))
	if got := totals(t, l, ledger.Window{From: day0, To: d.clk.Now().Add(time.Millisecond)}); got.Requests != before.totals[0].Requests ||
		got.Tokens != before.totals[0].Tokens+77 || got.TokensUnknown != before.totals[0].TokensUnknown-1 {
		t.Errorf("after settling r7 in pruned time: %+v, want %+v with r7's 77 tokens known", got, before.totals[0])
	}
}

// Reach and NewestUnknownCost over pruned time answer from the minutes:
// never earlier than the row that was there, and in its minute.
func testPruneReach(t *testing.T, e Engine) {
	d, l, day0 := pruneTraffic(t, e)
	w := ledger.Window{From: day0, To: d.clk.Now().Add(time.Millisecond)}
	type answer struct {
		at time.Time
		ok bool
	}
	read := func() (reach []answer, newest answer) {
		err := l.View(ctx, func(r ledger.WindowReader) error {
			for _, m := range []ledger.Measure{ledger.MeasureRequests, ledger.MeasureTokens, ledger.MeasureCost} {
				for _, need := range []int64{1, 17, 90, 150, 1e9} {
					at, ok, err := r.Reach(w, m, need)
					if err != nil {
						return err
					}
					reach = append(reach, answer{at, ok})
				}
			}
			at, ok, err := r.NewestUnknownCost(ledger.Window{From: day0, To: day0.Add(2 * 24 * time.Hour)})
			newest = answer{at, ok}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return reach, newest
	}
	wantReach, wantNewest := read()
	if _, err := pruner(t, l).Prune(ctx, ledger.PruneRequest{Before: day0.Add(3 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	gotReach, gotNewest := read()
	inMinute := func(got, want answer) bool {
		return got.ok == want.ok && (!got.ok || !got.at.Before(want.at) && got.at.Truncate(time.Minute).Equal(want.at.Truncate(time.Minute)))
	}
	for i := range wantReach {
		if !inMinute(gotReach[i], wantReach[i]) {
			t.Errorf("Reach #%d after prune = %v, want %v or later in its minute", i, gotReach[i], wantReach[i])
		}
	}
	if !inMinute(gotNewest, wantNewest) || !wantNewest.ok {
		t.Errorf("NewestUnknownCost after prune = %v, want %v or later in its minute", gotNewest, wantNewest)
	}
}

// A prune its check refuses deletes nothing and moves no frontier: a
// report from inside the time it would have pruned still counts the raw
// rows, not the whole hour.
func testPruneRefused(t *testing.T, e Engine) {
	d, l, day0 := pruneTraffic(t, e)
	addBudget(t, l, budgets.Budget{Name: "weekly", Kind: budgets.KindRequests, Limit: 5, Window: rolling(7 * 24 * time.Hour)})
	n := len(rowsOf(t, l))
	after := rowNear(t, l, day0).Add(time.Millisecond)
	q := ledger.ReportQuery{From: after, To: day0.Add(4 * 24 * time.Hour), By: []string{ledger.KeyModel}}
	want, err := l.Report(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("inside weekly")
	var saw []ledger.BudgetRecord
	_, err = pruner(t, l).Prune(ctx, ledger.PruneRequest{Before: day0.Add(3 * 24 * time.Hour), Check: func(now time.Time, bs []ledger.BudgetRecord) error {
		saw = bs
		if !now.Equal(d.clk.Now()) {
			t.Errorf("Check called at %v, want the ledger's clock %v", now, d.clk.Now())
		}
		return refuse
	}})
	if !errors.Is(err, refuse) || len(saw) != 1 || saw[0].Name != "weekly" {
		t.Fatalf("Prune = %v (Check saw %v), want the Check's refusal after seeing budget weekly", err, saw)
	}
	if got := len(rowsOf(t, l)); got != n {
		t.Errorf("refused prune deleted %d rows", n-got)
	}
	if got, err := d.open().Report(ctx, q); err != nil || !sameReport(got, want) {
		t.Errorf("report from %v after a refused prune = %s (%v), want the raw rows' %s", after, describeReport(got), err, describeReport(want))
	}
}

// Admission reads a window starting in pruned time exactly, batch after
// batch, as a fresh view does: no read carried over from the batch before
// subtracts or adds rows that are gone.
func testPruneAdmissionWindowSlides(t *testing.T, e Engine) {
	d, l, day0 := pruneTraffic(t, e)
	if _, err := pruner(t, l).Prune(ctx, ledger.PruneRequest{Before: day0.Add(3 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	span := d.clk.Now().Sub(day0.Add(36*time.Hour + 17*time.Second))
	for i := range 4 {
		now := d.clk.Now()
		w := ledger.Window{From: now.Add(-span), To: now.Add(time.Millisecond)}
		cal := ledger.Window{From: day0.Add(36*time.Hour + 17*time.Second), To: w.To}
		var admitted [2]ledger.Totals
		err := l.Reserve(ctx, ledger.Reservation{RequestID: fmt.Sprint("slide-", i), Operation: opDecisions, Expires: now.Add(time.Minute)},
			admitFunc(func(r ledger.WindowReader, _ ledger.Reservation) error {
				for j, x := range []ledger.Window{w, cal} {
					var err error
					if admitted[j], err = r.Totals(x); err != nil {
						return err
					}
				}
				return errProbe
			}))
		if !errors.Is(err, errProbe) {
			t.Fatalf("probe %d: %v", i, err)
		}
		if want := totals(t, l, w); admitted[0] != want {
			t.Errorf("probe %d: admission reads %+v over pruned time from %v, a fresh view %+v", i, admitted[0], w.From, want)
		}
		if want := totals(t, l, cal); admitted[1] != want {
			t.Errorf("probe %d: admission reads %+v over pruned time from %v, a fresh view %+v", i, admitted[1], cal.From, want)
		}
		// Write a row, so that the windows move, and let time pass.
		d.reserve(l, fmt.Sprint("w-", i), opChat, "gpt")
		settle(t, l, usage(fmt.Sprint("w-", i), "gpt", 3, 1))
		d.clk.Advance(20*time.Minute + 7*time.Second + 3*time.Millisecond)
	}
}
