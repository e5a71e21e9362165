package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

// pruneLedger writes five days of traffic from day0 (models, credentials,
// statuses, unknown tokens, one reservation never settled), then moves the
// clock to day 6 and writes once more so that the fold catches up.
func pruneLedger(t *testing.T) (*Store, *clock.Fake, time.Time) {
	t.Helper()
	day0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(day0.Add(23*time.Second + 117*time.Millisecond))
	s, _ := openTest(t, clk)
	for i := 0; clk.Now().Before(day0.Add(5 * 24 * time.Hour)); i++ {
		id := fmt.Sprint("r", i)
		model := []string{"m-small", "m-large", "m-mini"}[i%3]
		if err := s.Reserve(ctx, Reservation{RequestID: id, Operation: "decisions", Pool: "api", Model: model, Client: "ci", Expires: clk.Now().Add(time.Minute)}, nil); err != nil {
			t.Fatal(err)
		}
		if i == 7 {
			// Left open, as by a rotor that died.
		} else {
			st := Settlement{RequestID: id, Model: model, Credential: []string{"team-a", "team-b"}[i%2], Attempts: 1, Status: 200,
				InputTokens: Known(int64(10 * i)), OutputTokens: Known(int64(i)), TotalTokens: Known(int64(11 * i)), Latency: time.Duration(i) * time.Millisecond}
			if i%11 == 0 {
				st.Status, st.ErrorCode = 429, "rate_limit_exceeded"
			}
			if i%13 == 0 {
				st.InputTokens, st.OutputTokens, st.TotalTokens = Count{}, Count{}, Count{}
			}
			if err := s.Settle(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(17*time.Minute + 3*time.Second + 251*time.Millisecond)
	}
	clk.Set(day0.Add(6*24*time.Hour + 5*time.Minute))
	reserve(t, s, "last")
	settle(t, s, "last", 5, 200)
	return s, clk, day0
}

// pruneReads is every read over the ledger that must not change when rows
// are pruned: reports by day (and finer), and budget windows.
type pruneReads struct {
	reports [][]ReportRow
	totals  []Totals
	// through the writer, as admission reads a budget added later
	admitted Totals
}

// edgeOf returns a time just before a row of day 1 late in its minute: a
// window starting there reads that minute's rows raw (rawTotals), which
// pruning deletes.
func edgeOf(t *testing.T, s *Store, day0 time.Time) time.Time {
	t.Helper()
	for _, r := range mustRows(t, s, day0.Add(24*time.Hour), day0.Add(2*24*time.Hour)) {
		if r.Time.Second() >= 31 {
			return r.Time.Add(-time.Millisecond)
		}
	}
	t.Fatal("no row late in its minute on day 1")
	return time.Time{}
}

func readAll(t *testing.T, s *Store, day0, now, edge time.Time) pruneReads {
	t.Helper()
	var r pruneReads
	for _, q := range []ReportQuery{
		{From: day0, To: day0.Add(6 * 24 * time.Hour), By: []string{KeyDay}},
		{From: day0, To: day0.Add(7 * 24 * time.Hour), By: []string{KeyModel, KeyDay, KeyStatus}},
		{From: day0.Add(24 * time.Hour), To: day0.Add(3 * 24 * time.Hour), By: []string{KeyCredential, KeyClient}},
	} {
		rows, err := s.Report(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		r.reports = append(r.reports, rows)
	}
	end := now.Add(time.Millisecond)
	for _, from := range []time.Time{day0, day0.Add(30*time.Hour + 7*time.Minute), day0.Add(2*24*time.Hour - 3*time.Minute), day0.Add(4 * 24 * time.Hour), edge} {
		r.totals = append(r.totals, viewTotals(t, s, Window{from, end}))
	}
	// A budget added later: the writer reads its window, over pruned
	// time, at admission.
	err := s.Reserve(ctx, Reservation{RequestID: fmt.Sprint("probe-", now.UnixNano()), Operation: "decisions", Expires: now.Add(time.Minute)},
		AdmitFunc(func(w WindowReader, _ Reservation) error {
			var err error
			r.admitted, err = w.Totals(Window{edge, end})
			if err != nil {
				return err
			}
			return errors.New("probe only")
		}))
	if err == nil || err.Error() != "probe only" {
		t.Fatalf("probe admission: %v", err)
	}
	return r
}

func TestPruneKeepsReportsAndBudgetWindows(t *testing.T) {
	s, clk, day0 := pruneLedger(t)
	edge := edgeOf(t, s, day0)
	before := readAll(t, s, day0, clk.Now(), edge)
	// A report whose range starts inside pruned time counts that whole
	// hour (the rollups' bucket there).
	edgeQ := ReportQuery{From: edge, To: day0.Add(4 * 24 * time.Hour), By: []string{KeyDay, KeyModel}}
	wantEdge, err := s.Report(ctx, ReportQuery{From: edge.Truncate(time.Hour), To: edgeQ.To, By: edgeQ.By})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := s.Rows(ctx, day0, clk.Now().Add(time.Millisecond), 0)

	cut := day0.Add(3 * 24 * time.Hour)
	res, err := s.Prune(ctx, PruneRequest{Before: cut})
	if err != nil {
		t.Fatal(err)
	}
	left, _ := s.Rows(ctx, day0, cut, 0)
	if res.Deleted == 0 || !res.Until.Equal(cut) || res.KeptUnsettled != 1 || len(left) != 1 || left[0].RequestID != "r7" {
		t.Fatalf("Prune = %+v, rows left before the cut %v: want every settled row before %v deleted and r7 (unsettled) kept", res, left, cut)
	}
	if got := len(all) - int(res.Deleted); got != len(mustRows(t, s, day0, clk.Now().Add(time.Millisecond))) {
		t.Errorf("rows after prune: %d deleted of %d, but the ledger holds another count", res.Deleted, len(all))
	}
	after := readAll(t, s, day0, clk.Now(), edge)
	if got, err := s.Report(ctx, edgeQ); err != nil || !reflect.DeepEqual(got, wantEdge) {
		t.Errorf("report from %v inside pruned time = %+v, %v; want its whole hour's %+v", edge, got, err, wantEdge)
	}
	if !reflect.DeepEqual(before.reports, after.reports) {
		t.Errorf("reports changed by prune:\nbefore %+v\nafter  %+v", before.reports, after.reports)
	}
	if !reflect.DeepEqual(before.totals, after.totals) {
		t.Errorf("window totals changed by prune:\nbefore %+v\nafter  %+v", before.totals, after.totals)
	}
	if before.admitted != after.admitted || after.admitted.Requests == 0 {
		t.Errorf("a 30-day window read at admission: %+v before prune, %+v after", before.admitted, after.admitted)
	}

	// A second Open (another process) reads the same.
	again := openAt(t, s.path, clk)
	if got := readAll(t, again, day0, clk.Now(), edge); !reflect.DeepEqual(before.reports, got.reports) || !reflect.DeepEqual(before.totals, got.totals) {
		t.Errorf("another process reads other numbers after prune")
	}
}

func mustRows(t *testing.T, s *Store, from, to time.Time) []Row {
	t.Helper()
	rows, err := s.Rows(ctx, from, to, 0)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// Reach and NewestUnknownCost over pruned time answer from the minutes:
// never earlier than the row that was there, and in its minute.
func TestPruneReachInPrunedTimeNeverEarlier(t *testing.T) {
	s, clk, day0 := pruneLedger(t)
	w := Window{day0, clk.Now().Add(time.Millisecond)}
	type answer struct {
		at time.Time
		ok bool
	}
	read := func() (reach []answer, newest answer) {
		err := s.View(ctx, func(r WindowReader) error {
			for _, need := range []int64{1, 17, 150, 900, 1e9} {
				at, ok, err := r.Reach(w, MeasureRequests, need)
				if err != nil {
					return err
				}
				reach = append(reach, answer{at, ok})
			}
			at, ok, err := r.NewestUnknownCost(Window{day0, day0.Add(2 * 24 * time.Hour)})
			newest = answer{at, ok}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return reach, newest
	}
	wantReach, wantNewest := read()
	if _, err := s.Prune(ctx, PruneRequest{Before: day0.Add(3 * 24 * time.Hour)}); err != nil {
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

func TestPruneRefusedByCheckChangesNothing(t *testing.T) {
	s, clk, day0 := pruneLedger(t)
	if err := s.PutBudget(ctx, BudgetRecord{Name: "weekly", Kind: "requests", Limit: 5, Window: "7d", CreatedAt: clk.Now()}, false); err != nil {
		t.Fatal(err)
	}
	n := len(mustRows(t, s, day0, clk.Now().Add(time.Millisecond)))
	refuse := errors.New("inside weekly")
	var saw []BudgetRecord
	_, err := s.Prune(ctx, PruneRequest{Before: day0.Add(3 * 24 * time.Hour), Check: func(now time.Time, bs []BudgetRecord) error {
		saw = bs
		if !now.Equal(clk.Now()) {
			t.Errorf("Check called at %v, want the ledger's clock %v", now, clk.Now())
		}
		return refuse
	}})
	if !errors.Is(err, refuse) || len(saw) != 1 || saw[0].Name != "weekly" {
		t.Fatalf("Prune = %v (Check saw %v), want the Check's refusal after seeing budget weekly", err, saw)
	}
	if got := len(mustRows(t, s, day0, clk.Now().Add(time.Millisecond))); got != n {
		t.Errorf("refused prune deleted %d rows", n-got)
	}
	if p, _ := s.PrunedUntil(ctx); !p.IsZero() {
		t.Errorf("refused prune moved the prune frontier to %v", p)
	}
}

// Rows not yet folded into the rollups are kept: the cut moves back to
// the fold frontier's hour, and says so.
func TestPruneKeepsRowsAheadOfTheFold(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openTest(t, clk)
	reserve(t, s, "a")
	settle(t, s, "a", 10, 200)
	clk.Advance(3 * time.Hour)
	res, err := s.Prune(ctx, PruneRequest{Before: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 0 || !res.Until.Before(t0) || len(mustRows(t, s, t0, clk.Now())) != 1 {
		t.Errorf("Prune = %+v: want the unfolded row kept and the cut before it", res)
	}
}

func TestBackupIsAConsistentLedger(t *testing.T) {
	s, clk, day0 := pruneLedger(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "copy.db")
	if err := s.Backup(ctx, path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("backup file: %v, mode %v; want 0600 (it holds token hashes)", err, fi.Mode().Perm())
	}
	cp := openAt(t, path, clk)
	end := clk.Now().Add(time.Millisecond)
	if want, got := mustRows(t, s, day0, end), mustRows(t, cp, day0, end); !reflect.DeepEqual(want, got) {
		t.Errorf("backup holds %d rows, the ledger %d", len(got), len(want))
	}
	q := ReportQuery{From: day0, To: end, By: []string{KeyDay}}
	want, _ := s.Report(ctx, q)
	got, _ := cp.Report(ctx, q)
	if !reflect.DeepEqual(want, got) {
		t.Errorf("backup's report differs")
	}
	// A file that exists is refused, untouched.
	if err := os.WriteFile(filepath.Join(dir, "taken"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Backup(ctx, filepath.Join(dir, "taken")); !errors.Is(err, ErrFileExists) {
		t.Errorf("backup over an existing file: %v, want ErrFileExists", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "taken")); string(b) != "mine" {
		t.Errorf("backup changed an existing file")
	}
}

func TestRowByID(t *testing.T) {
	s, clk, day0 := pruneLedger(t)
	all := mustRows(t, s, day0, clk.Now().Add(time.Millisecond))
	got, ok, err := s.RowByID(ctx, all[20].RequestID)
	if err != nil || !ok || !reflect.DeepEqual(got, all[20]) {
		t.Errorf("RowByID(%s) = %+v %v %v, want %+v", all[20].RequestID, got, ok, err, all[20])
	}
	if _, ok, err := s.RowByID(ctx, "nope"); ok || err != nil {
		t.Errorf("RowByID(nope) = %v %v, want not found", ok, err)
	}
}

// The writer's window cache slides a window by subtracting the rows that
// left it; in pruned time those rows are gone, so a window starting there
// must be read from the rollups each time, not slid.
func TestPruneWriterWindowOverPrunedTimeSlidesExactly(t *testing.T) {
	s, clk, day0 := pruneLedger(t)
	if _, err := s.Prune(ctx, PruneRequest{Before: day0.Add(3 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	span := clk.Now().Sub(day0.Add(36 * time.Hour))
	for i := 0; i < 4; i++ {
		now := clk.Now()
		w := Window{now.Add(-span), now.Add(time.Millisecond)}
		var admitted Totals
		err := s.Reserve(ctx, Reservation{RequestID: fmt.Sprint("slide-", i), Operation: "decisions", Expires: now.Add(time.Minute)},
			AdmitFunc(func(r WindowReader, _ Reservation) error {
				var err error
				admitted, err = r.Totals(w)
				if err == nil {
					err = errors.New("probe only")
				}
				return err
			}))
		if err == nil || err.Error() != "probe only" {
			t.Fatalf("probe %d: %v", i, err)
		}
		if want := viewTotals(t, s, w); admitted != want {
			t.Errorf("probe %d: the writer reads %+v over pruned time, a fresh view %+v", i, admitted, want)
		}
		clk.Advance(20 * time.Minute)
	}
}
