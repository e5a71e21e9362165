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

// What prune keeps (reports, budget windows, Reach, a refused prune, the
// writer's windows over pruned time) is tested on both engines by the
// conformance suite (ledger/conformance/prune.go); the tests here are the
// SQLite ledger's own: its fold frontier, backup and RowByID.

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

func mustRows(t *testing.T, s *Store, from, to time.Time) []Row {
	t.Helper()
	rows, err := s.Rows(ctx, from, to, 0)
	if err != nil {
		t.Fatal(err)
	}
	return rows
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
	// A relative name that SQLite would read as a URI is the file itself:
	// the copy goes there, 0600, and nowhere else.
	t.Chdir(dir)
	for _, name := range []string{"file:uri.db", "file:mem.db?mode=memory"} {
		if err := s.Backup(ctx, name); err != nil {
			t.Fatalf("backup to %s: %v", name, err)
		}
		if fi, err := os.Stat(name); err != nil || fi.Size() == 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("backup to %s: %v, the file it names holds %d bytes, mode %v", name, err, fi.Size(), fi.Mode().Perm())
		}
	}
	if _, err := os.Stat("uri.db"); err == nil {
		t.Error("a backup to file:uri.db went to uri.db")
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

// A ledger pruned by a rotor that cut inside an hour (pruned_until at
// 10:17:10.5, the rows before it gone) is read as pgledger reads one: the
// partly pruned minute (windows) and hour (reports) count as pruned, so a
// read ending, or starting, just after the cut counts whole buckets there,
// never less than the rows it covered. Before, a read ending just after
// the cut read that minute's and hour's raw rows, missing the deleted ones.
func TestPrunedInsideAnHourReadsWholeBuckets(t *testing.T) {
	hour := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	cut := hour.Add(17*time.Minute + 10*time.Second + 500*time.Millisecond)
	clk := clock.NewFake(hour)
	s, _ := openTest(t, clk)
	for i, x := range []time.Time{hour, cut.Add(-20 * time.Second), cut.Add(-time.Millisecond), cut.Add(time.Millisecond), cut.Add(20 * time.Second), hour.Add(30 * time.Minute)} {
		clk.Set(x)
		id := fmt.Sprint("r", i)
		reserve(t, s, id)
		settle(t, s, id, 10, 200)
	}
	clk.Set(hour.Add(24 * time.Hour))
	reserve(t, s, "last")
	settle(t, s, "last", 10, 200)
	type read struct {
		name string
		fn   func() int64
	}
	var reads []read
	for _, r := range []struct{ from, to time.Time }{
		{hour.Add(-time.Hour), cut.Add(10 * time.Second)},
		{hour.Add(-time.Hour), cut.Add(time.Second)},
		{cut.Add(5 * time.Second), cut.Add(40 * time.Second)},
		{hour.Add(-time.Hour), hour.Add(40 * time.Minute)},
	} {
		reads = append(reads, read{fmt.Sprintf("window [%s, %s)", r.from.Format(time.RFC3339Nano), r.to.Format(time.RFC3339Nano)), func() int64 {
			var got Totals
			if err := s.View(ctx, func(v WindowReader) error {
				var err error
				got, err = v.Totals(Window{From: r.from, To: r.to})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return got.Requests
		}}, read{fmt.Sprintf("report [%s, %s)", r.from.Format(time.RFC3339Nano), r.to.Format(time.RFC3339Nano)), func() int64 {
			rows, err := s.Report(ctx, ReportQuery{From: r.from, To: r.to})
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, row := range rows {
				n += row.Requests
			}
			return n
		}})
	}
	before := make([]int64, len(reads))
	for i, r := range reads {
		before[i] = r.fn()
	}
	// The prune of a rotor that did not move the cut back to its hour.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('pruned_until', ?)`, cut.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM usage WHERE ts_ms < ? AND state = 1`, cut.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	for i, r := range reads {
		if got := r.fn(); got < before[i] {
			t.Errorf("%s after a prune to %s: %d requests, want at least the %d before", r.name, cut.Format(time.RFC3339Nano), got, before[i])
		}
	}
}
