package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

var t0 = time.Date(2026, 11, 30, 10, 17, 23, 0, time.UTC)

func openTest(t *testing.T, clk clock.Clock) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rotor.db")
	return openAt(t, path, clk), path
}

// openAt opens a Store on the ledger file at path (another one stands for
// another rotor process); it is closed when the test ends.
func openAt(t *testing.T, path string, clk clock.Clock) *Store {
	t.Helper()
	return openWith(t, path, Options{Clock: clk})
}

// openWith is openAt with any options: this package's tests call Open
// themselves only to test Open or Close. (Other packages' tests use
// internal/testutil/ledgertest, which this package cannot import.)
func openWith(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var ctx = context.Background()

// openRaw opens a plain connection pool on the ledger file at path, for
// reading what the writer stored; it is closed when the test ends.
func openRaw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// viewTotals reads the totals of w through a read view of st.
func viewTotals(t *testing.T, st *Store, w Window) Totals {
	t.Helper()
	var got Totals
	if err := st.View(ctx, func(r WindowReader) error {
		var err error
		got, err = r.Totals(w)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func reserve(t *testing.T, s *Store, id string) {
	t.Helper()
	if err := s.Reserve(ctx, Reservation{RequestID: id, Operation: "decisions", Pool: "api", Model: "m", Expires: t0.Add(time.Hour)}, nil); err != nil {
		t.Fatalf("Reserve(%s): %v", id, err)
	}
}

func settle(t *testing.T, s *Store, id string, tokens int64, status int) {
	t.Helper()
	err := s.Settle(ctx, Settlement{RequestID: id, Model: "m", Credential: "team-a", Attempts: 1, Status: status,
		InputTokens: Known(tokens / 2), OutputTokens: Known(tokens - tokens/2), TotalTokens: Known(tokens)})
	if err != nil {
		t.Fatalf("Settle(%s): %v", id, err)
	}
}

func TestReserveSettleRelease(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openTest(t, clk)
	reserve(t, s, "r1")
	reserve(t, s, "r2")
	settle(t, s, "r1", 10, 200)
	if err := s.Release(ctx, "r2"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	rows, err := s.Rows(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].RequestID != "r1" || !rows[0].Settled || rows[0].TotalTokens != Known(10) || rows[0].CostMicros.Known {
		t.Fatalf("rows = %+v, want one settled r1 with 10 tokens and unknown cost", rows)
	}
	if err := s.Settle(ctx, Settlement{RequestID: "r1"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("settling twice = %v, want ErrNotFound", err)
	}
	if err := s.Release(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Release(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.Reserve(ctx, Reservation{RequestID: "r1", Operation: "decisions"}, nil); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate request id = %v, want ErrExists", err)
	}
}

// rec is a row a test wrote: when, its tokens once settled with them, and
// whether it is still an open reservation.
type rec struct {
	ts     time.Time
	tokens Count
	open   bool
}

// rawTotals is Totals over recs in [from, to): every row counts one
// request of unknown cost, and its tokens when known.
func rawTotals(recs []rec, from, to time.Time) Totals {
	var want Totals
	for _, r := range recs {
		if r.ts.Before(from) || !r.ts.Before(to) {
			continue
		}
		want.Requests++
		want.CostUnknown++
		if r.tokens.Known {
			want.Tokens += r.tokens.V
		} else {
			want.TokensUnknown++
		}
	}
	return want
}

// TestRollupWindowsMatchRawRows: totals read from minute and hour rollups
// plus raw edges equal a brute-force sum over raw rows, for random rows
// and random windows, including NULL counts never read as zero.
func TestRollupWindowsMatchRawRows(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openTest(t, clk)
	rng := rand.New(rand.NewSource(1))
	var recs []rec
	for i := 0; i < 400; i++ {
		clk.Advance(time.Duration(rng.Int63n(int64(20 * time.Minute))).Truncate(time.Millisecond))
		id := fmt.Sprint("r", i)
		reserve(t, s, id)
		r := rec{ts: clk.Now()}
		switch rng.Intn(4) {
		case 0: // stays open
			r.open = true
		case 1:
			if err := s.Settle(ctx, Settlement{RequestID: id, Status: 502}); err != nil {
				t.Fatal(err)
			}
		default:
			n := rng.Int63n(1000)
			settle(t, s, id, n, 200)
			r.tokens = Known(n)
		}
		recs = append(recs, r)
	}
	end := clk.Now()
	for i := 0; i < 300; i++ {
		from := t0.Add(time.Duration(rng.Int63n(int64(end.Sub(t0)))).Truncate(time.Millisecond))
		to := from.Add(time.Duration(rng.Int63n(int64(72 * time.Hour))).Truncate(time.Millisecond))
		if i%10 == 0 {
			from = from.Truncate(time.Hour)
		}
		want := rawTotals(recs, from, to)
		if got := viewTotals(t, s, Window{from, to}); got != want {
			t.Fatalf("Totals[%s, %s) = %+v, want %+v", from, to, got, want)
		}
	}
}

// rawReach is Reach computed from the raw rows: the time of the row at
// which the amounts in w first add up to need.
func rawReach(times []time.Time, amounts []int64, w Window, need int64) (time.Time, bool) {
	var cum int64
	for i, ts := range times {
		if ts.Before(w.From) || !ts.Before(w.To) {
			continue
		}
		if cum += amounts[i]; cum >= need {
			return ts, true
		}
	}
	return time.Time{}, false
}

func TestReachAndNewestUnknownCostMatchRawRows(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openTest(t, clk)
	rng := rand.New(rand.NewSource(2))
	var times []time.Time
	var tokens []int64
	for i := 0; i < 200; i++ {
		clk.Advance(time.Duration(rng.Int63n(int64(7 * time.Minute))).Truncate(time.Millisecond))
		id := fmt.Sprint("r", i)
		reserve(t, s, id)
		n := rng.Int63n(100)
		settle(t, s, id, n, 200)
		times, tokens = append(times, clk.Now()), append(tokens, n)
	}
	w := Window{t0.Add(13 * time.Minute), clk.Now().Add(time.Millisecond)}
	err := s.View(ctx, func(r WindowReader) error {
		ones := make([]int64, len(times))
		for i := range ones {
			ones[i] = 1
		}
		checks := []struct {
			name      string
			m         Measure
			per       []int64
			max, step int64
		}{
			{"requests", MeasureRequests, ones, 150, 7},
			{"tokens", MeasureTokens, tokens, 9000, 577},
		}
		for _, c := range checks {
			for need := int64(1); need < c.max; need += c.step {
				at, ok, err := r.Reach(w, c.m, need)
				if err != nil {
					return err
				}
				want, wantOK := rawReach(times, c.per, w, need)
				if ok != wantOK || (ok && !at.Equal(want)) {
					t.Errorf("Reach(%s, %d) = %v, %v; want %v, %v", c.name, need, at, ok, want, wantOK)
				}
			}
		}
		// Every row has an unknown cost: the newest is the last one.
		at, ok, err := r.NewestUnknownCost(w)
		if err != nil {
			return err
		}
		if !ok || !at.Equal(times[len(times)-1]) {
			t.Errorf("NewestUnknownCost = %v, %v; want %v", at, ok, times[len(times)-1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSchemaFromNewerRotorRefusedUnchanged(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	if _, err := s.DB().Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion()+1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, path, Options{Clock: clk})
	var se *SchemaError
	if !errors.As(err, &se) || !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open(newer schema) = %v, want *SchemaError", err)
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Error("database file changed although Open refused it")
	}
}

func TestCorruptFileRefusedUnchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rotor.db")
	junk := []byte("this is not a sqlite database, just some bytes long enough to look like a header......")
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, path, Options{}); err == nil {
		t.Fatal("Open(corrupt file) succeeded")
	}
	after, _ := os.ReadFile(path)
	if string(after) != string(junk) {
		t.Error("corrupt file was modified")
	}
}

// TestEveryPooledConnectionCarriesPragmas: WAL, synchronous NORMAL (the default), busy
// timeout 5000 and foreign keys on every connection of the pool.
func TestEveryPooledConnectionCarriesPragmas(t *testing.T) {
	s, _ := openTest(t, clock.NewFake(t0))
	var conns []interface{ Close() error }
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 4; i++ {
		c, err := s.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		p, err := s.Pragmas(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"journal_mode": "wal", "synchronous": "1", "busy_timeout": "5000", "foreign_keys": "1"}
		for k, v := range want {
			if p[k] != v {
				t.Errorf("conn %d: %s = %q, want %q", i, k, p[k], v)
			}
		}
	}
}

func TestConcurrentWritesAllCommitted(t *testing.T) {
	s, _ := openTest(t, clock.NewFake(t0))
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				id := fmt.Sprintf("g%d-%d", g, i)
				if err := s.Reserve(ctx, Reservation{RequestID: id, Operation: "decisions"}, nil); err != nil {
					t.Error(err)
					return
				}
				if err := s.Settle(ctx, Settlement{RequestID: id, Status: 200, TotalTokens: Known(3)}); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	got := viewTotals(t, s, Window{t0.Add(-time.Hour), t0.Add(time.Hour)})
	if got.Requests != 640 || got.Tokens != 1920 || got.TokensUnknown != 0 {
		t.Errorf("totals = %+v, want 640 requests, 1920 tokens", got)
	}
}

func TestCloseFlushesQueuedWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rotor.db")
	s, err := Open(ctx, path, Options{Clock: clock.NewFake(t0)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_ = s.Reserve(ctx, Reservation{RequestID: fmt.Sprint(i), Operation: "decisions"}, nil)
		}(i)
	}
	wg.Wait()
	s.Close()
	if err := s.Reserve(ctx, Reservation{RequestID: "late", Operation: "decisions"}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Reserve after Close = %v, want ErrClosed", err)
	}
	s2 := openAt(t, path, clock.NewFake(t0))
	rows, _ := s2.Rows(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), 0)
	if len(rows) != 50 {
		t.Errorf("%d rows after reopen, want 50", len(rows))
	}
}

func TestBudgetsPutReplaceRemove(t *testing.T) {
	s, _ := openTest(t, clock.NewFake(t0))
	b := BudgetRecord{Name: "daily", Kind: "tokens", Limit: 100, Window: "day"}
	if err := s.PutBudget(ctx, b, false); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBudget(ctx, b, false); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate without replace = %v, want ErrExists", err)
	}
	b.Limit = 200
	if err := s.PutBudget(ctx, b, true); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Budgets(ctx)
	if len(got) != 1 || got[0].Limit != 200 {
		t.Errorf("budgets = %+v, want one with limit 200", got)
	}
	if err := s.RemoveBudget(ctx, "daily"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveBudget(ctx, "daily"); !errors.Is(err, ErrNotFound) {
		t.Errorf("remove twice = %v, want ErrNotFound", err)
	}
}

// TestBudgetFromAnotherConnectionBindsNextAdmission: a budget written by
// another process (another Store on the same file) is seen by this store's
// next admission.
func TestBudgetFromAnotherConnectionBindsNextAdmission(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	other := openAt(t, path, clk)
	count := func(r WindowReader, _ Reservation) error {
		if len(r.Budgets()) > 0 {
			return errors.New("refused: budget present")
		}
		return nil
	}
	if err := s.Reserve(ctx, Reservation{RequestID: "a", Operation: "decisions"}, AdmitFunc(count)); err != nil {
		t.Fatalf("first admission: %v", err)
	}
	if err := other.PutBudget(ctx, BudgetRecord{Name: "x", Kind: "requests", Limit: 1, Window: "day"}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve(ctx, Reservation{RequestID: "b", Operation: "decisions"}, AdmitFunc(count)); err == nil {
		t.Fatal("admission after another process added a budget did not see it")
	}
}

func TestTokenRevokedByAnotherProcessStopsAtNextLookup(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	h := [32]byte{1, 2, 3}
	if err := s.AddClientToken(ctx, "ci", h, false); err != nil {
		t.Fatal(err)
	}
	if label, ok, err := s.LookupToken(ctx, h); err != nil || !ok || label != "ci" {
		t.Fatalf("LookupToken = %q, %v, %v", label, ok, err)
	}
	other := openAt(t, path, clk)
	if err := other.RevokeClientToken(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.LookupToken(ctx, h); err != nil || ok {
		t.Fatalf("LookupToken after revoke = %v, %v; want not found", ok, err)
	}
	// Usage writes alone do not reload the token table.
	if err := s.TouchTokens(ctx, map[string]time.Time{"ci": t0}); err != nil {
		t.Fatal(err)
	}
}

func TestReportGroupsAndUnknownCost(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openTest(t, clk)
	// Two hours of rows so the report reads both the rollup and raw edges.
	for i := 0; i < 30; i++ {
		id := fmt.Sprint("r", i)
		if err := s.Reserve(ctx, Reservation{RequestID: id, Operation: "decisions", Model: "m", Client: []string{"ci", "default"}[i%2]}, nil); err != nil {
			t.Fatal(err)
		}
		status := 200
		if i%10 == 9 {
			status = 429
		}
		if err := s.Settle(ctx, Settlement{RequestID: id, Model: "decide-mini", Credential: []string{"a", "b", "c"}[i%3], Status: status,
			InputTokens: Known(3), OutputTokens: Known(2), TotalTokens: Known(5)}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(7 * time.Minute)
	}
	rows, err := s.Report(ctx, ReportQuery{From: t0.Add(-24 * time.Hour), To: clk.Now(), By: []string{KeyCredential}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("report rows = %+v, want 3 credentials", rows)
	}
	var req, tok, errs int64
	for _, r := range rows {
		req += r.Requests
		tok += r.TotalTokens
		errs += r.Errors
		if r.CostKnown {
			t.Errorf("group %v: cost reported known, want unknown", r.Keys)
		}
	}
	if req != 30 || tok != 150 || errs != 3 {
		t.Errorf("sums requests=%d tokens=%d errors=%d, want 30, 150, 3", req, tok, errs)
	}
	// A window inside one hour reads raw rows only.
	rows, err = s.Report(ctx, ReportQuery{From: t0, To: t0.Add(20 * time.Minute), By: []string{KeyClient, KeyStatus}})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, r := range rows {
		n += r.Requests
	}
	if n != 3 {
		t.Errorf("20-minute report counts %d requests, want 3: %+v", n, rows)
	}
	if _, err := s.Report(ctx, ReportQuery{From: t0, To: clk.Now(), By: []string{"colour"}}); err == nil {
		t.Error("unknown group key accepted")
	}
}

// TestWriterWindowCacheMatchesExact: the writer's cross-batch window cache
// answers every window exactly as a fresh computation over the rollups and
// raw edges, through reservations, settlements, releases, rollbacks,
// windows sliding by seconds or hours, and rows written by another
// connection.
func TestWriterWindowCacheMatchesExact(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	other := openAt(t, path, clk)
	rng := rand.New(rand.NewSource(3))
	lengths := []time.Duration{time.Minute, 7 * time.Minute, time.Hour, 26 * time.Hour}
	checks := 0
	check := AdmitFunc(func(r WindowReader, _ Reservation) error {
		now := r.Now()
		for _, d := range lengths {
			from := now.Add(-d).Add(time.Millisecond)
			cached, err := r.Totals(Window{from, now.Add(time.Millisecond)})
			if err != nil {
				return err
			}
			// A window that does not end now bypasses the cache.
			exact, err := r.Totals(Window{from, now.Add(2 * time.Millisecond)})
			if err != nil {
				return err
			}
			if cached != exact {
				t.Errorf("at %s window %s: cached %+v, exact %+v", now.Format(time.RFC3339Nano), d, cached, exact)
			}
			checks++
		}
		return nil
	})
	var open []string
	for i := 0; i < 600; i++ {
		switch n := rng.Intn(10); {
		case n < 5:
			id := fmt.Sprint("r", i)
			if err := s.Reserve(ctx, Reservation{RequestID: id, Operation: "decisions"}, check); err != nil {
				t.Fatal(err)
			}
			open = append(open, id)
		case n < 8 && len(open) > 0:
			k := rng.Intn(len(open))
			id := open[k]
			open = append(open[:k], open[k+1:]...)
			if rng.Intn(4) == 0 {
				if err := s.Release(ctx, id); err != nil {
					t.Fatal(err)
				}
			} else if err := s.Settle(ctx, Settlement{RequestID: id, Status: 200, TotalTokens: Known(rng.Int63n(500))}); err != nil {
				t.Fatal(err)
			}
		case n == 8:
			// Another process writes: the cache must not miss its rows.
			id := fmt.Sprint("other", i)
			if err := other.Reserve(ctx, Reservation{RequestID: id, Operation: "decisions"}, nil); err != nil {
				t.Fatal(err)
			}
		default:
			// A refused admission leaves the batch's cache as it was.
			if err := s.Reserve(ctx, Reservation{RequestID: fmt.Sprint("x", i), Operation: "decisions"}, AdmitFunc(func(r WindowReader, res Reservation) error {
				if err := check(r, res); err != nil {
					return err
				}
				return errors.New("refused")
			})); err == nil {
				t.Fatal("refusal ignored")
			}
		}
		step := []time.Duration{0, time.Millisecond, 1500 * time.Millisecond, 40 * time.Second, 3 * time.Minute, 2 * time.Hour}[rng.Intn(6)]
		clk.Advance(step)
	}
	if checks < 1000 {
		t.Errorf("only %d window checks ran", checks)
	}
}

// A front door that answered from the cached token list is backed by
// admission: a token revoked by another process is refused inside the
// reservation's transaction, at its next request.
func TestReservationRefusesTokenRevokedElsewhere(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	h := [32]byte{9, 9, 9}
	if err := s.AddClientToken(ctx, "ci", h, false); err != nil {
		t.Fatal(err)
	}
	res := func(id string) Reservation {
		return Reservation{RequestID: id, Operation: "decisions", Token: h, CheckToken: true}
	}
	if err := s.Reserve(ctx, res("a"), nil); err != nil {
		t.Fatalf("reservation with a stored token: %v", err)
	}
	other := openAt(t, path, clk)
	if err := other.RevokeClientToken(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	// The cached list may still know the token ...
	if label, ok, _ := s.LookupTokenCached(ctx, h); !ok || label != "ci" {
		t.Logf("cached lookup already refreshed: %q %v", label, ok)
	}
	// ... but admission does not.
	if err := s.Reserve(ctx, res("b"), nil); !errors.Is(err, ErrTokenRevoked) {
		t.Fatalf("reservation after revocation elsewhere = %v, want ErrTokenRevoked", err)
	}
	if label, ok, err := s.LookupTokenCached(ctx, h); err != nil || ok {
		t.Errorf("cached lookup after the writer saw the revocation = %q, %v, %v", label, ok, err)
	}
	// A token created elsewhere is found through the fallback.
	h2 := [32]byte{7}
	if err := other.AddClientToken(ctx, "new", h2, false); err != nil {
		t.Fatal(err)
	}
	if label, ok, err := s.LookupTokenCached(ctx, h2); err != nil || !ok || label != "new" {
		t.Errorf("cached lookup of a token created elsewhere = %q, %v, %v", label, ok, err)
	}
}

// A write that fails after its transaction began changes nothing: the
// caller gets ErrUnavailable, no half of it stays (a budget half-written
// would bind every admission), and the rollups, whose frontier the batch
// may have moved, go on counting every row exactly once.
func TestFailedWriteRollsBackWhole(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	db := openRaw(t, path)
	write := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			id := fmt.Sprint("r", i)
			reserve(t, s, id)
			settle(t, s, id, 10, 200)
			clk.Advance(11 * time.Second) // past foldAge: the next batch folds
		}
	}
	write(0, 3)
	err := s.execConfig(ctx, func(ctx context.Context, q execQuerier) error {
		if _, err := q.ExecContext(ctx, `INSERT INTO budgets (name, kind, limit_value, window, created_ms) VALUES ('half', 'requests', 1, 'day', 0)`); err != nil {
			return err
		}
		return errors.New("disk I/O error") // the change's next statement failed
	})
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("a write that failed halfway = %v, want ErrUnavailable", err)
	}
	if bs, err := s.Budgets(ctx); err != nil || len(bs) != 0 {
		t.Errorf("budgets after the failed write = %+v, %v; want none", bs, err)
	}
	write(3, 6)
	if f := foldFrontier(t, db); f <= t0.UnixMilli() {
		t.Fatalf("fold frontier %d: nothing folded", f)
	}
	var requests, tokens int64
	if err := db.QueryRow(`SELECT TOTAL(requests), TOTAL(tokens) FROM usage_minute`).Scan(&requests, &tokens); err != nil {
		t.Fatal(err)
	}
	var rawRequests, rawTokens int64
	if err := db.QueryRow(`SELECT COUNT(*), TOTAL(total_tokens) FROM usage WHERE ts_ms < ?`, foldFrontier(t, db)).Scan(&rawRequests, &rawTokens); err != nil {
		t.Fatal(err)
	}
	if requests != rawRequests || tokens != rawTokens {
		t.Errorf("minute rollup = %d requests, %d tokens; want the %d rows, %d tokens before the frontier", requests, tokens, rawRequests, rawTokens)
	}
}
