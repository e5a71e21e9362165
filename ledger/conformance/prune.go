package conformance

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
)

// Pruning (DESIGN "Ledger care"; `rotor ledger prune`): the settled rows
// before the cut go, the rollups stay, so that reports and budget windows
// over pruned time answer as before, on both engines.

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
	// So does one whose range ends there.
	endQ := ledger.ReportQuery{From: day0, To: edge, By: []string{ledger.KeyDay, ledger.KeyModel}}
	wantEnd, err := l.Report(ctx, ledger.ReportQuery{From: endQ.From, To: edge.Truncate(time.Hour).Add(time.Hour), By: endQ.By})
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

	p := capability[ledger.Pruner](t, l)
	if at, err := p.PrunedUntil(ctx); err != nil || !at.IsZero() {
		t.Errorf("PrunedUntil before any prune = %v, %v; want zero", at, err)
	}
	res, err := p.Prune(ctx, ledger.PruneRequest{Before: cut})
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if at, err := p.PrunedUntil(ctx); err != nil || !at.Equal(res.Until) {
		t.Errorf("PrunedUntil after the prune = %v, %v; want its cut %v", at, err, res.Until)
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
	if got, err := l.Report(ctx, endQ); err != nil || !sameReport(got, wantEnd) {
		t.Errorf("report to %v inside pruned time = %v, %v; want its whole hour's %v", edge, describeReport(got), err, describeReport(wantEnd))
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

// A prune earlier than one already made changes nothing: `rotor ledger
// prune --before` run again with an older date (a cron job's fixed date,
// or a typo) deletes no row and leaves every report and budget window as
// it was. The pruned frontier never moves back: if it did, reads between
// the two dates would count raw rows that are gone instead of the
// rollups, and reports and budgets over that time would shrink.
func testPruneEarlierAfterLater(t *testing.T, e Engine) {
	d, l, day0 := pruneTraffic(t, e)
	edge := rowNear(t, l, day0).Add(-time.Millisecond)
	p := capability[ledger.Pruner](t, l)
	if _, err := p.Prune(ctx, ledger.PruneRequest{Before: day0.Add(3 * 24 * time.Hour)}); err != nil {
		t.Fatalf("Prune: %v", err)
	}
	before := d.readAll(l, day0, edge)
	res, err := p.Prune(ctx, ledger.PruneRequest{Before: day0.Add(24 * time.Hour)})
	if err != nil || res.Deleted != 0 {
		t.Fatalf("the earlier Prune = %+v, %v; want nothing deleted", res, err)
	}
	if at, err := p.PrunedUntil(ctx); err != nil || !at.Equal(day0.Add(3*24*time.Hour)) {
		t.Errorf("PrunedUntil after the earlier prune = %v, %v; want the later cut %v", at, err, day0.Add(3*24*time.Hour))
	}
	after := d.readAll(l, day0, edge)
	for i := range before.reports {
		if !sameReport(before.reports[i], after.reports[i]) {
			t.Errorf("report %d changed by the earlier prune:\nbefore %s\nafter  %s", i, describeReport(before.reports[i]), describeReport(after.reports[i]))
		}
	}
	if !reflect.DeepEqual(before.totals, after.totals) || before.admitted != after.admitted {
		t.Errorf("windows changed by the earlier prune:\nbefore %+v %+v\nafter  %+v %+v", before.totals, before.admitted, after.totals, after.admitted)
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
	if _, err := capability[ledger.Pruner](t, l).Prune(ctx, ledger.PruneRequest{Before: day0.Add(3 * 24 * time.Hour)}); err != nil {
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
	_, err = capability[ledger.Pruner](t, l).Prune(ctx, ledger.PruneRequest{Before: day0.Add(3 * 24 * time.Hour), Check: func(now time.Time, bs []ledger.BudgetRecord) error {
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
	if _, err := capability[ledger.Pruner](t, l).Prune(ctx, ledger.PruneRequest{Before: day0.Add(3 * 24 * time.Hour)}); err != nil {
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

// A cut that is not on a whole hour (`--before 10:17:30.5`): the rollups
// count whole minutes (windows) and whole hours (reports), so no read can
// split the cut's hour into its pruned and its kept rows. The cut is
// moved back to the start of its hour (UTC), whose rows all stay, and
// every read that starts at or after that hour's start, or on a whole
// minute (windows) or hour (reports) before it, answers exactly as before
// the prune: reports by day, model and status, budget windows rolling and
// calendar, Reach, NewestUnknownCost, a window read at admission, and the
// rows themselves. Nothing read there is undercounted (a raw read of rows
// that are gone) or counted twice (a rollup and the rows it counts).
func testPruneMidHour(t *testing.T, e Engine) {
	var offs []time.Duration
	for _, off := range []time.Duration{
		17*time.Minute + 30*time.Second + 500*time.Millisecond,
		17*time.Minute + 10*time.Second + 500*time.Millisecond,
		17*time.Minute + 50*time.Second + 500*time.Millisecond,
	} {
		k := len(offs)
		offs = append(offs, off)
		t.Run(fmt.Sprint(off), func(t *testing.T) {
			t.Parallel() // each cut has a database of its own
			pruneMidHour(t, e, off, k)
		})
	}
}

// midHourReads is every read pruneMidHour compares.
type midHourReads struct {
	reports  []string
	windows  []midHourWindow
	admitted []ledger.Totals
	budgets  map[string]budgets.Status
	rows     []string
}

// midHourWindow is what a WindowReader answers over one window.
type midHourWindow struct {
	w      ledger.Window
	totals ledger.Totals
	reach  []reachAnswer // by measure and need
	newest reachAnswer   // NewestUnknownCost
}

type reachAnswer struct {
	at time.Time
	ok bool
}

func (a reachAnswer) String() string {
	if !a.ok {
		return "none"
	}
	return a.at.Format(time.RFC3339Nano)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sameAnswer is whether a Reach or NewestUnknownCost answer after a prune
// to until is the one before it: the same, or, for a row before until
// (pruned, only its minute's rollup row is left), later in its minute.
func sameAnswer(got, want reachAnswer, until time.Time) bool {
	if got.ok != want.ok || !got.ok {
		return got.ok == want.ok
	}
	if want.at.Before(until) {
		return !got.at.Before(want.at) && got.at.Truncate(time.Minute).Equal(want.at.Truncate(time.Minute))
	}
	return got.at.Equal(want.at)
}

// pruneMidHour is one cut, the k-th of testPruneMidHour's. Every report
// edge pair and every window is read at each cut, but (to keep the suite
// fast under the race detector) a report pair by one of its three
// groupings and a window's Reach at one of its three middle needs, taken
// in turn and shifted by k, so that the three cuts together read every
// pair by every grouping and every window at every need.
func pruneMidHour(t *testing.T, e Engine, off time.Duration, k int) {
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	hour := t0.Truncate(24 * time.Hour).Add(24*time.Hour + 10*time.Hour)
	cut := hour.Add(off)
	cutMin := cut.Truncate(time.Minute)
	// Rows every 9 minutes from two hours before the cut's hour to three
	// after, every 3.1 s around the cut, and at the edges of the cut and
	// of its minute: rows before and after the cut in its minute and hour.
	at := map[time.Time]bool{}
	for x := hour.Add(-2*time.Hour + 41*time.Second); x.Before(hour.Add(3 * time.Hour)); x = x.Add(9*time.Minute + 7*time.Second + 300*time.Millisecond) {
		at[x] = true
	}
	for x := hour.Add(10*time.Minute + 700*time.Millisecond); x.Before(hour.Add(25 * time.Minute)); x = x.Add(3*time.Second + 100*time.Millisecond) {
		at[x] = true
	}
	for _, x := range []time.Time{hour, cutMin, cut.Add(-time.Millisecond), cut, cut.Add(time.Millisecond), cutMin.Add(time.Minute - time.Millisecond), cutMin.Add(time.Minute)} {
		at[x] = true
	}
	times := make([]time.Time, 0, len(at))
	for x := range at {
		times = append(times, x)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for i, x := range times {
		d.clk.Set(x)
		id := fmt.Sprint("m", i)
		model := []string{"gpt", "m-large", "m-mini"}[i%3]
		op := opChat
		if i%4 == 0 {
			op = opDecisions
		}
		r := ledger.Reservation{RequestID: id, Operation: op, Pool: "api", Model: model, Client: []string{"ci", "dev"}[i%2], Expires: x.Add(time.Minute)}
		if err := l.Reserve(ctx, r, nil); err != nil {
			t.Fatalf("Reserve(%s): %v", id, err)
		}
		// One row a little before the cut and one after it are left open,
		// as by a rotor that died.
		if x.Equal(cutMin) || x.Equal(cut.Add(time.Millisecond)) {
			continue
		}
		st := usage(id, model, int64(10*i), int64(i))
		st.Credential = []string{"team-a", "team-b", "team-c"}[i%3]
		if i%11 == 0 {
			st.Status, st.ErrorCode = 429, "rate_limit_exceeded"
		}
		if i%13 == 0 {
			st.InputTokens, st.OutputTokens, st.TotalTokens = ledger.Count{}, ledger.Count{}, ledger.Count{}
		}
		settle(t, l, st)
	}
	// Later the same day (calendar windows reach back over the cut), one
	// more row, so that SQLite's fold catches up.
	d.clk.Set(hour.Add(5 * time.Hour))
	d.reserve(l, "last", opChat, "gpt")
	settle(t, l, usage("last", "gpt", 5, 1))
	now := d.clk.Now()
	end := now.Add(time.Millisecond)

	// Budgets of every kind whose windows span the cut, or start just
	// before or after it, in its minute and in its hour: a rolling window
	// of length now-x+1ms starts at x.
	starts := []time.Time{hour, hour.Add(time.Millisecond), cutMin, cut.Add(-5 * time.Second), cut.Add(-time.Millisecond), cut,
		cut.Add(time.Millisecond), cut.Add(15 * time.Second), cutMin.Add(time.Minute), cutMin.Add(time.Minute + 20*time.Second), hour.Add(40 * time.Minute)}
	kinds := []struct {
		kind  budgets.Kind
		limit int64
	}{{budgets.KindRequests, 40}, {budgets.KindTokens, 3_000}, {budgets.KindCost, 1_000_000_000}}
	for _, k := range kinds {
		for i, x := range starts {
			addBudget(t, l, budgets.Budget{Name: fmt.Sprintf("%s-%d", k.kind, i), Kind: k.kind, Limit: k.limit, Window: rolling(now.Sub(x) + time.Millisecond)})
		}
		for _, c := range []string{"day", "week", "month"} {
			addBudget(t, l, budgets.Budget{Name: fmt.Sprintf("%s-%s", k.kind, c), Kind: k.kind, Limit: k.limit, Window: calendar(c)})
		}
	}

	// Window edges: at or after the cut's hour anywhere, before it on
	// whole minutes only; report edges before it on whole hours only.
	edges := append([]time.Time{hour.Add(-2 * time.Hour), hour.Add(-47 * time.Minute), hour.Add(-20 * time.Minute)}, starts...)
	edges = append(edges, hour.Add(time.Hour), hour.Add(time.Hour+17*time.Minute+3*time.Second), end)
	reportEdges := []time.Time{hour.Add(-2 * time.Hour), hour.Add(-time.Hour), hour, hour.Add(time.Millisecond), cutMin, cut.Add(-time.Millisecond),
		cut, cut.Add(time.Millisecond), cut.Add(20 * time.Second), cutMin.Add(time.Minute), hour.Add(40 * time.Minute), hour.Add(time.Hour), hour.Add(3 * time.Hour), end}
	probes := 0
	read := func(l ledger.Ledger) midHourReads {
		t.Helper()
		var r midHourReads
		probes++
		groupings := [][]string{{ledger.KeyDay}, {ledger.KeyModel, ledger.KeyStatus}, {ledger.KeyCredential, ledger.KeyClient, ledger.KeyOperation}}
		pair := 0
		for i, a := range reportEdges {
			for _, b := range reportEdges[i+1:] {
				pair++
				for _, by := range [][]string{groupings[(pair+k)%len(groupings)]} {
					rows, err := l.Report(ctx, ledger.ReportQuery{From: a, To: b, By: by})
					if err != nil {
						t.Fatalf("Report: %v", err)
					}
					r.reports = append(r.reports, fmt.Sprintf("[%s, %s) by %v:%s", a.Format(time.RFC3339Nano), b.Format(time.RFC3339Nano), by, describeReport(rows)))
				}
			}
		}
		// One View per window: a View is one bounded read (PostgreSQL's
		// at most ten seconds), and nothing writes while the probe reads.
		middle := []int64{7, 50, 1_000}
		for i, a := range edges {
			for _, b := range edges[i+1:] {
				x := midHourWindow{w: ledger.Window{From: a, To: b}}
				mid := middle[(len(r.windows)+k)%len(middle)]
				err := l.View(ctx, func(v ledger.WindowReader) error {
					var err error
					if x.totals, err = v.Totals(x.w); err != nil {
						return err
					}
					for _, m := range []ledger.Measure{ledger.MeasureRequests, ledger.MeasureTokens, ledger.MeasureCost} {
						for _, need := range []int64{1, mid, 1e9} {
							var a reachAnswer
							if a.at, a.ok, err = v.Reach(x.w, m, need); err != nil {
								return err
							}
							x.reach = append(x.reach, a)
						}
					}
					x.newest.at, x.newest.ok, err = v.NewestUnknownCost(x.w)
					return err
				})
				if err != nil {
					t.Fatalf("View: %v", err)
				}
				r.windows = append(r.windows, x)
			}
		}
		// The same windows ending now, read at admission (the writer's
		// view, whose cache slides windows).
		err := l.Reserve(ctx, ledger.Reservation{RequestID: fmt.Sprint("probe-", probes), Operation: opDecisions, Expires: now.Add(time.Minute)},
			admitFunc(func(v ledger.WindowReader, _ ledger.Reservation) error {
				r.admitted = r.admitted[:0] // the last run decides (ledger.Admitter)
				for _, a := range edges[:len(edges)-1] {
					tot, err := v.Totals(ledger.Window{From: a, To: end})
					if err != nil {
						return err
					}
					r.admitted = append(r.admitted, tot)
				}
				return errProbe
			}))
		if !errors.Is(err, errProbe) {
			t.Fatalf("probe admission: %v", err)
		}
		r.budgets = statuses(t, l)
		rows, err := l.Rows(ctx, hour, end, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			r.rows = append(r.rows, describeRow(row))
		}
		return r
	}
	before := read(l)
	var settledBefore int64
	for _, r := range rowsOf(t, l) {
		if r.Time.Before(hour) && r.Settled {
			settledBefore++
		}
	}

	res, err := capability[ledger.Pruner](t, l).Prune(ctx, ledger.PruneRequest{Before: cut})
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if left, err := l.Rows(ctx, hour.Add(-3*time.Hour), hour, 0); err != nil || !res.Until.Equal(hour) || res.Deleted != settledBefore || res.KeptUnsettled != 0 || len(left) != 0 {
		t.Errorf("Prune(before %v) = %+v, rows left before %v: %v (%v); want the cut moved back to its hour's start %v, its %d settled rows before deleted, none left",
			cut, res, hour, ids(left), err, hour, settledBefore)
	}
	for name, l := range map[string]ledger.Ledger{"the pruning handle": l, "another handle": d.open()} {
		after := read(l)
		compare := func(what string, before, after []string) {
			t.Helper()
			if len(before) != len(after) {
				t.Fatalf("%s after prune, %s: %d reads, want %d", name, what, len(after), len(before))
			}
			n := 0
			for i := range before {
				if before[i] != after[i] {
					if n++; n <= 5 {
						t.Errorf("%s after prune, %s changed:\nbefore %s\nafter  %s", name, what, before[i], after[i])
					}
				}
			}
			if n > 5 {
				t.Errorf("%s after prune: %d more %s changed", name, n-5, what)
			}
		}
		compare("report", before.reports, after.reports)
		n := 0
		for i, x := range before.windows {
			y := after.windows[i]
			ok := x.totals == y.totals && sameAnswer(y.newest, x.newest, res.Until)
			for j := range x.reach {
				ok = ok && sameAnswer(y.reach[j], x.reach[j], res.Until)
			}
			if n += btoi(!ok); !ok && n <= 5 {
				t.Errorf("%s after prune, window [%s, %s): %+v, reach %v, newest unknown cost %v; before %+v, reach %v, newest unknown cost %v",
					name, x.w.From.Format(time.RFC3339Nano), x.w.To.Format(time.RFC3339Nano), y.totals, y.reach, y.newest, x.totals, x.reach, x.newest)
			}
		}
		if n > 5 {
			t.Errorf("%s after prune: %d more windows changed", name, n-5)
		}
		compare("rows from the cut's hour", before.rows, after.rows)
		if !reflect.DeepEqual(before.admitted, after.admitted) {
			t.Errorf("%s after prune, windows read at admission from %v:\nbefore %+v\nafter  %+v", name, edges[:len(edges)-1], before.admitted, after.admitted)
		}
		for _, b := range sortedKeys(before.budgets) {
			if x, y := before.budgets[b], after.budgets[b]; !reflect.DeepEqual(x, y) {
				t.Errorf("%s after prune, budget %s (%s): used %d unknown %d %s frees %v, before %d unknown %d %s frees %v",
					name, b, x.Window.Describe(), y.Used, y.UnknownRows, y.State, y.FreesAt, x.Used, x.UnknownRows, x.State, x.FreesAt)
			}
		}
	}
}

// A pruned minute whose rollup counts unknown cost only for requests
// still in flight (prune keeps them; the rollups count them as unknown)
// holds no row of unknown cost: NewestUnknownCost looks past it, and a
// cost budget failing closed on an older settled row of unknown cost
// frees when that row leaves, not an in-flight request's minute later.
func testPruneInFlightMinute(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	other := d.open()
	setPrice(t, l, gptPrice)
	h0 := t0.Truncate(time.Hour).Add(time.Hour)
	// 10 min in: a stream cut, settled, of unknown cost.
	d.clk.Set(h0.Add(10*time.Minute + 7*time.Second))
	d.reserve(l, "cut", opChat, "gpt")
	settle(t, l, ledger.Settlement{RequestID: "cut", Model: "gpt", Status: 200, ErrorCode: "upstream_stream_cut"})
	// 20 min in: a request in flight for five hours, alone in its minute.
	d.clk.Set(h0.Add(20*time.Minute + 5*time.Second))
	open := ledger.Reservation{RequestID: "open", Operation: opChat, Pool: "api", Model: "gpt", Client: "ci", Expires: h0.Add(5 * time.Hour)}
	if err := l.Reserve(ctx, open, nil); err != nil {
		t.Fatal(err)
	}
	// Past the hour a request settles, so that SQLite's fold passes it.
	d.clk.Set(h0.Add(time.Hour + 2*time.Minute))
	d.reserve(l, "known", opChat, "gpt")
	settle(t, l, usage("known", "gpt", 1, 0))
	res, err := capability[ledger.Pruner](t, l).Prune(ctx, ledger.PruneRequest{Before: h0.Add(time.Hour)})
	if err != nil || !res.Until.Equal(h0.Add(time.Hour)) || res.Deleted != 1 || res.KeptUnsettled != 1 {
		t.Fatalf("Prune = %+v, %v; want cut at %v, the cut row deleted, the open one kept", res, err, h0.Add(time.Hour))
	}
	addBudget(t, l, budgets.Budget{Name: "usd", Kind: budgets.KindCost, Limit: 5_000_000, Window: rolling(2 * time.Hour)})
	// NewestUnknownCost answers in the cut row's minute (pruned: its
	// last instant), never the open request's.
	frees := h0.Add(11*time.Minute - time.Millisecond).Add(2 * time.Hour)
	for name, h := range map[string]ledger.Ledger{"its own handle": l, "another handle": other} {
		err := h.View(ctx, func(r ledger.WindowReader) error {
			if at, ok, err := r.NewestUnknownCost(ledger.Window{From: h0.Add(15 * time.Minute), To: h0.Add(time.Hour)}); err != nil || ok {
				t.Errorf("%s: NewestUnknownCost over the pruned minute of a request in flight = %v, %v, %v; want none", name, at, ok, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if st := status(t, h, "usd"); st.State != budgets.StateFailClosed || st.UnknownRows != 1 || !st.FreesAt.Equal(frees) {
			t.Errorf("%s: status over pruned time beside a request in flight = %s, %d unknown, frees %v; want fail-closed on 1 row, freeing at %v (the cut row's minute leaves)",
				name, st.State, st.UnknownRows, st.FreesAt, frees)
		}
	}
	err = d.admit(l, budgets.NewAdmitter(), "refused", opChat, "gpt")
	var pe *budgets.PolicyBlockedError
	if !errors.As(err, &pe) || len(pe.Budgets) != 1 || !pe.Budgets[0].FreesAt.Equal(frees) {
		t.Errorf("admission while failing closed = %v, want policy blocked by usd freeing at %v", err, frees)
	}
	// Once the cut row's minute left, the open request's minute does not
	// fail the budget closed.
	d.clk.Set(frees)
	if st := status(t, l, "usd"); st.State != budgets.StateOK || st.UnknownRows != 0 {
		t.Errorf("at %v, the cut row gone, the request still in flight: %s, %d unknown; want ok", frees, st.State, st.UnknownRows)
	}
	if err := d.admit(l, budgets.NewAdmitter(), "admitted", opChat, "gpt"); err != nil {
		t.Errorf("admission once the unknown row left: %v", err)
	}
}
