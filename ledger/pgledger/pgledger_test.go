package pgledger

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/dburl"
	"github.com/rotorhq/rotor/internal/testutil/pgtest"
	"github.com/rotorhq/rotor/ledger"
)

// open migrates a fresh schema and opens a Store on it.
func open(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	u, _ := pgtest.Schema(t)
	if _, _, err := Migrate(context.Background(), u, Options{}); err != nil {
		t.Fatal(err)
	}
	return openURL(t, u, opts), u
}

func openURL(t testing.TB, u string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), u, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func exec(t testing.TB, u, q string, args ...any) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, q, args...); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesUnmigratedOlderAndNewerSchemas(t *testing.T) {
	ctx := context.Background()
	u, _ := pgtest.Schema(t)
	if _, err := Open(ctx, u, Options{}); !errors.Is(err, ledger.ErrSchemaTooOld) || !strings.Contains(err.Error(), "rotor ledger migrate") {
		t.Fatalf("Open on an empty schema = %v, want ErrSchemaTooOld naming rotor ledger migrate", err)
	}
	from, to, err := Migrate(ctx, u, Options{})
	if err != nil || from != 0 || to != len(migrationNames()) {
		t.Fatalf("Migrate = %d, %d, %v", from, to, err)
	}
	if from, to, err := Migrate(ctx, u, Options{}); err != nil || from != to {
		t.Fatalf("second Migrate = %d, %d, %v; want nothing to do", from, to, err)
	}
	s := openURL(t, u, Options{})
	if got := s.Location(); got != dburl.Mask(u) {
		t.Fatalf("Location = %q", got)
	}
	s.Close()

	exec(t, u, "UPDATE meta SET value = 0 WHERE key = 'schema_version'")
	if _, err := Open(ctx, u, Options{}); !errors.Is(err, ledger.ErrSchemaTooOld) {
		t.Fatalf("Open on an older schema = %v, want ErrSchemaTooOld", err)
	}
	exec(t, u, "UPDATE meta SET value = 999 WHERE key = 'schema_version'")
	_, err = Open(ctx, u, Options{})
	var se *ledger.SchemaError
	if !errors.As(err, &se) || !errors.Is(err, ledger.ErrSchemaTooNew) || se.Path != dburl.Mask(u) {
		t.Fatalf("Open on a newer schema = %v, want *SchemaError", err)
	}
	if _, _, err := Migrate(ctx, u, Options{}); !errors.As(err, &se) {
		t.Fatalf("Migrate on a newer schema = %v, want *SchemaError", err)
	}
	var v int64
	c, _ := pgx.Connect(ctx, u)
	defer c.Close(ctx)
	if err := c.QueryRow(ctx, "SELECT value FROM meta WHERE key = 'schema_version'").Scan(&v); err != nil || v != 999 {
		t.Fatalf("newer schema changed: %d %v", v, err)
	}
}

func TestPasswordNeverInErrors(t *testing.T) {
	const pw = "Zq9sekrit"
	for _, u := range []string{
		"postgres://postgres:" + pw + "@127.0.0.1:1/test",
		"postgres://postgres@127.0.0.1:1/test?password=" + pw,
		"postgres://postgres:" + pw + "@127.0.0.1:notaport/test",
		// Pasted as typed, not percent-encoded: the driver's own message
		// quotes the password's part before the slash, space and all.
		"postgres://postgres:" + pw + " x/y@127.0.0.1:1/test",
	} {
		_, err := Open(context.Background(), u, Options{ConnectTimeout: 300 * time.Millisecond})
		if err == nil {
			t.Fatalf("Open(%s) succeeded", dburl.Mask(u))
		}
		if strings.Contains(err.Error(), pw) {
			t.Fatalf("error leaks the password: %v", err)
		}
		if !strings.Contains(err.Error(), "127.0.0.1") && !strings.Contains(err.Error(), "xxxxx") {
			t.Fatalf("error does not name the database: %v", err)
		}
		_, _, err = Migrate(context.Background(), u, Options{ConnectTimeout: 300 * time.Millisecond})
		if err == nil || strings.Contains(err.Error(), pw) {
			t.Fatalf("Migrate error leaks the password or is nil: %v", err)
		}
	}
	_, err := Open(context.Background(), "postgres://postgres:"+pw+"@127.0.0.1:1/test", Options{ConnectTimeout: 300 * time.Millisecond})
	if !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("unreachable server: %v, want ErrUnavailable", err)
	}
}

// An open Store names its database masked, in Location and in every
// error: the password a URL holds must not reach a log line or an error
// body when the server goes away under a running bridge.
func TestPasswordNeverInAnOpenStoresErrors(t *testing.T) {
	const pw = "Zq9sekrit"
	u, _ := pgtest.Schema(t)
	if _, _, err := Migrate(context.Background(), u, Options{}); err != nil {
		t.Fatal(err)
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	// sslpassword, the passphrase of a client key, is one of the URL's
	// passwords (DESIGN: masked in password= parameters too); without a
	// key the driver never uses it, so the test server accepts the URL
	// whatever its authentication.
	q := pu.Query()
	q.Set("sslpassword", pw)
	pu.RawQuery = q.Encode()
	p := newProxy(t, pu.Host)
	pu.Host = p.addr
	s := openURL(t, pu.String(), Options{})
	if loc := s.Location(); strings.Contains(loc, pw) || loc != dburl.Mask(pu.String()) {
		t.Errorf("Location = %q, want the URL masked", loc)
	}
	p.down()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = s.Budgets(ctx)
	if !errors.Is(err, ledger.ErrUnavailable) || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "xxxxx") {
		t.Errorf("Budgets with the server gone = %v; want ErrUnavailable naming the database masked", err)
	}
}

func TestReserveSettleReleaseAndTotals(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 1, 10, 30, 15, 0, time.UTC))
	s, _ := open(t, Options{Clock: clk})
	if _, err := s.PutPrices(ctx, []ledger.Price{{Model: "m", InputMicros: 1_000_000, OutputMicros: 2_000_000, Source: ledger.SourceSet}}, false); err != nil {
		t.Fatal(err)
	}
	exp := clk.Now().Add(time.Minute)
	for _, id := range []string{"a", "b", "c"} {
		if err := s.Reserve(ctx, ledger.Reservation{RequestID: id, Expires: exp, Operation: "chat", Model: "m", Client: "cli"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Reserve(ctx, ledger.Reservation{RequestID: "a", Expires: exp, Operation: "chat"}, nil); !errors.Is(err, ledger.ErrExists) {
		t.Fatalf("duplicate reserve = %v", err)
	}
	// The price changes after admission: the settlement keeps the old one.
	if _, err := s.PutPrices(ctx, []ledger.Price{{Model: "m", InputMicros: 9_000_000, OutputMicros: 9_000_000, Source: ledger.SourceSet}}, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "a", Model: "m", Status: 200, InputTokens: ledger.Known(10), OutputTokens: ledger.Known(5), TotalTokens: ledger.Known(15)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "a", Model: "m", Status: 200}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("second settle = %v", err)
	}
	if err := s.Release(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "b"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("second release = %v", err)
	}
	rows, err := s.Rows(ctx, time.Time{}, clk.Now().Add(time.Hour), 0)
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows = %+v, %v", rows, err)
	}
	if r := rows[0]; !r.Settled || r.CostMicros != ledger.Known(20) || r.TotalTokens != ledger.Known(15) {
		t.Fatalf("settled row = %+v, want cost 20 at the admission price", r)
	}
	if r := rows[1]; r.Settled || r.CostMicros.Known || r.TotalTokens.Known {
		t.Fatalf("open row = %+v, want unknown usage", r)
	}
	clk.Advance(3 * time.Hour)
	for _, w := range []ledger.Window{
		{From: clk.Now().Add(-24 * time.Hour), To: clk.Now().Add(time.Millisecond)},
		{From: rows[0].Time, To: rows[0].Time.Add(time.Millisecond)},
		{From: rows[0].Time.Add(-90 * time.Minute), To: clk.Now()},
	} {
		var got ledger.Totals
		if err := s.View(ctx, func(r ledger.WindowReader) error {
			var err error
			got, err = r.Totals(w)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		want := ledger.Totals{Requests: 2, Tokens: 15, TokensUnknown: 1, CostMicros: 20, CostUnknown: 1}
		if got != want {
			t.Fatalf("Totals(%v) = %+v, want %+v", w, got, want)
		}
	}
}

// TestAdmissionExactAcrossStores: two pools (two processes) of 16 callers
// each against a requests budget of 50 admit exactly 50.
func TestAdmissionExactAcrossStores(t *testing.T) {
	ctx := context.Background()
	var commits, shared atomic.Int64
	onCommit := func(n int, _ time.Duration) {
		commits.Add(1)
		if n > 1 {
			shared.Add(1)
		}
	}
	s1, u := open(t, Options{OnCommit: onCommit})
	s2 := openURL(t, u, Options{OnCommit: onCommit})
	if err := s1.PutBudget(ctx, ledger.BudgetRecord{Name: "r", Kind: "requests", Limit: 50, Window: "24h"}, false); err != nil {
		t.Fatal(err)
	}
	admit := budgets.NewAdmitter()
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		s := []*Store{s1, s2}[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				id := fmt.Sprintf("g%d-%d", g, i)
				err := s.Reserve(ctx, ledger.Reservation{RequestID: id, Expires: time.Now().Add(time.Minute), Operation: "chat", Model: "m"}, admit)
				var ee *budgets.ExceededError
				switch {
				case err == nil:
					ok.Add(1)
					if err := s.Settle(ctx, ledger.Settlement{RequestID: id, Model: "m", Status: 200, InputTokens: ledger.Known(1), OutputTokens: ledger.Known(1), TotalTokens: ledger.Known(2)}); err != nil {
						t.Error(err)
					}
				case errors.As(err, &ee):
					refused.Add(1)
				default:
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 50 || refused.Load() != 128-50 {
		t.Fatalf("admitted %d, refused %d; want 50 and 78", ok.Load(), refused.Load())
	}
	rows, err := s2.Rows(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0)
	if err != nil || len(rows) != 50 {
		t.Fatalf("%d rows, %v; want 50", len(rows), err)
	}
	if shared.Load() == 0 {
		t.Fatalf("no commit shared by two writes in %d commits", commits.Load())
	}
}

// TestTerminatedConnectionIsUnavailableThenRecovers: connections killed
// from another session fail the writes in flight with ErrUnavailable; the
// same Store serves again afterwards.
func TestTerminatedConnectionIsUnavailableThenRecovers(t *testing.T) {
	ctx := context.Background()
	_, u := open(t, Options{})
	// Only this Store's connections carry this name: other tests' are
	// never touched.
	app := fmt.Sprintf("pgledger-kill-%d", time.Now().UnixNano())
	s := openURL(t, u+"&application_name="+app, Options{MaxConns: 4})
	admin, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var unavailable atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("k%d-%d", g, i)
				err := s.Reserve(ctx, ledger.Reservation{RequestID: id, Expires: time.Now().Add(time.Minute), Operation: "chat"}, nil)
				n.Add(1)
				if err != nil {
					if !errors.Is(err, ledger.ErrUnavailable) {
						t.Errorf("reserve: %v, want ErrUnavailable", err)
					}
					unavailable.Add(1)
				}
			}
		}()
	}
	// Kill this Store's connections until a write saw it.
	for unavailable.Load() == 0 {
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE application_name = $1`, app); err != nil {
			t.Fatal(err)
		}
		for start := n.Load(); n.Load() < start+4; {
			time.Sleep(time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	// The pool replaced the dead connections: the same Store serves.
	if err := s.Reserve(ctx, ledger.Reservation{RequestID: "after", Expires: time.Now().Add(time.Minute), Operation: "chat"}, nil); err != nil {
		t.Fatalf("after the kill: %v", err)
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "after", Status: 200}); err != nil {
		t.Fatalf("after the kill: %v", err)
	}
}

func TestClientTokensListHashes(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, Options{})
	h := [32]byte{1, 2, 3, 31: 9}
	if err := s.AddClientToken(ctx, "ci", h, false); err != nil {
		t.Fatal(err)
	}
	ts, err := s.ClientTokens(ctx)
	if err != nil || len(ts) != 1 || ts[0].Hash != h || ts[0].Label != "ci" {
		t.Fatalf("ClientTokens = %+v, %v; want ci with its hash", ts, err)
	}
}

// TestAdmissionExactWithCalendarRollingAndCostBudgets: batches that read
// windows ahead (the last batch's, slid or kept), and cost budgets that
// make a batch write its rows before reading in-flight reservations, still
// admit exactly a calendar requests budget, round after round.
func TestAdmissionExactWithCalendarRollingAndCostBudgets(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	s1, u := open(t, Options{Clock: clk})
	s2 := openURL(t, u, Options{Clock: clk})
	if _, err := s1.PutPrices(ctx, []ledger.Price{{Model: "m", InputMicros: 1, OutputMicros: 1, Source: ledger.SourceSet}}, false); err != nil {
		t.Fatal(err)
	}
	for _, b := range []ledger.BudgetRecord{
		{Name: "day", Kind: "requests", Limit: 40, Window: "day"},
		{Name: "rolling", Kind: "requests", Limit: 1000, Window: "1h"},
		{Name: "cost", Kind: "cost", Limit: 1_000_000_000, Window: "month"},
	} {
		if err := s1.PutBudget(ctx, b, false); err != nil {
			t.Fatal(err)
		}
	}
	admit := budgets.NewAdmitter()
	var ok atomic.Int64
	for round := range 6 {
		var wg sync.WaitGroup
		for g := range 12 {
			s := []*Store{s1, s2}[g%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("r%d-%d", round, g)
				err := s.Reserve(ctx, ledger.Reservation{RequestID: id, Expires: clk.Now().Add(time.Minute), Operation: "chat", Model: "m"}, admit)
				var ee *budgets.ExceededError
				switch {
				case err == nil:
					ok.Add(1)
					if g%3 != 0 { // some stay open: in flight
						if err := s.Settle(ctx, ledger.Settlement{RequestID: id, Model: "m", Status: 200, InputTokens: ledger.Known(1), OutputTokens: ledger.Known(1), TotalTokens: ledger.Known(2)}); err != nil {
							t.Error(err)
						}
					}
				case errors.As(err, &ee):
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		clk.Advance(7 * time.Second)
	}
	if ok.Load() != 40 {
		t.Fatalf("admitted %d, want exactly the calendar budget's 40", ok.Load())
	}
}

// A batch of settlements leaves the windows the last admission batch read
// for the next one to read ahead: with admissions and settlements
// alternating (every request at one caller), admission batches would
// otherwise read every window in a round trip of its own.
func TestSettlementBatchKeepsTheWindowsToReadAhead(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, Options{})
	b := budgets.Budget{Name: "day", Kind: budgets.KindRequests, Limit: 100, Window: budgets.Window{Rolling: 24 * time.Hour}}
	if err := s.PutBudget(ctx, b.Record(), true); err != nil {
		t.Fatal(err)
	}
	adm := budgets.NewAdmitter()
	exp := time.Now().Add(time.Hour)
	if err := s.Reserve(ctx, ledger.Reservation{RequestID: "r1", Expires: exp, Operation: "responses", Model: "m"}, adm); err != nil {
		t.Fatal(err)
	}
	if got := len(s.w.lastWindows); got != 1 {
		t.Fatalf("after an admission batch: %d windows to read ahead, want 1", got)
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "r1", Model: "m", Status: 200, InputTokens: ledger.Known(1), OutputTokens: ledger.Known(1), TotalTokens: ledger.Known(2)}); err != nil {
		t.Fatal(err)
	}
	if got := len(s.w.lastWindows); got != 1 {
		t.Fatalf("after a settlement batch: %d windows to read ahead, want the admission's 1", got)
	}
}

// A settlement or release of this process's own reservation goes in one
// round trip with its COMMIT; when its row is gone (deleted behind the
// store's back), the guarded statement fails the batch, and each write is
// retried alone and answered for itself.
func TestOwnSettlementsInOneRoundTripFailAlone(t *testing.T) {
	ctx := context.Background()
	s, u := open(t, Options{})
	exp := time.Now().Add(time.Hour)
	for _, id := range []string{"gone", "kept", "released-gone"} {
		if err := s.Reserve(ctx, ledger.Reservation{RequestID: id, Expires: exp, Operation: "responses", Model: "m"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, u, "DELETE FROM usage WHERE request_id IN ('gone', 'released-gone')")
	var wg sync.WaitGroup
	errs := map[string]error{}
	var mu sync.Mutex
	for _, id := range []string{"gone", "kept", "released-gone"} {
		wg.Go(func() {
			var err error
			if id == "released-gone" {
				err = s.Release(ctx, id)
			} else {
				err = s.Settle(ctx, ledger.Settlement{RequestID: id, Model: "m", Status: 200, InputTokens: ledger.Known(1), OutputTokens: ledger.Known(1), TotalTokens: ledger.Known(2)})
			}
			mu.Lock()
			errs[id] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	for id, want := range map[string]error{"gone": ledger.ErrNotFound, "released-gone": ledger.ErrNotFound, "kept": nil} {
		if got := errs[id]; !errors.Is(got, want) || (want == nil && got != nil) {
			t.Errorf("%s: %v, want %v", id, got, want)
		}
	}
	rows, err := s.Rows(ctx, time.Time{}, time.Now().Add(2*time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].RequestID != "kept" || !rows[0].Settled {
		t.Fatalf("rows %+v, want kept, settled", rows)
	}
}

// A batch's statements are planned once per connection (generic plans),
// and a ledger starts small: a plan made while usage held a few rows must
// still read a time range through its index once it holds many, or every
// batch reads the whole table (the end-to-end benchmark fell from 1,300 to
// 420 requests a second over 60,000 requests). Under the batch's
// settings, the plan of its first statement, made on a small analyzed
// table, uses the index on the grown one.
func TestBatchPlansKeepTheirIndexAsTheLedgerGrows(t *testing.T) {
	ctx := context.Background()
	_, u := open(t, Options{})
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	now := time.Now().UnixMilli()
	fill := `INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation) SELECT $1 || i, $2::bigint - i, 1, 0, 'decisions' FROM generate_series(1, $3::int) i`
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{fill, []any{"small-", now, 50}},
		{"ANALYZE usage", nil},
		{batchSettings, nil},
		{"PREPARE head AS " + headSQL(1, false), nil},
		// The first execution makes the generic plan, on the small table.
		{fmt.Sprintf("EXECUTE head(NULL, %d, %d)", now-30*86_400_000, 30*86_400_000), nil},
		{fill, []any{"grown-", now - 1000, 50_000}},
	} {
		if _, err := tx.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	rows, err := tx.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE head(NULL, %d, %d)", now-30*86_400_000, 30*86_400_000))
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	p := strings.Join(plan, "\n")
	if strings.Contains(p, "Seq Scan on usage") || !strings.Contains(p, "usage_ts") {
		t.Errorf("the batch's first statement reads usage without its time index:\n%s", p)
	}
}

// A reservation lives as long from the database's time as its machine
// gave it by its own clock (README, For teams: times come from the
// database's clock). A bridge whose clock is 20 minutes behind reserved a
// request (deadline and grace, 15 minutes, from its clock): while the
// request is in flight, another machine's request under a cost budget is
// admitted, where before the row read as abandoned, of unknown cost, and
// every cost budget failed closed.
func TestReservationFromASkewedMachineIsInFlight(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, Options{})
	if _, err := s.PutPrices(ctx, []ledger.Price{{Model: "m", InputMicros: 1, OutputMicros: 1, Source: ledger.SourceSet}}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBudget(ctx, ledger.BudgetRecord{Name: "cost", Kind: "cost", Limit: 1_000_000_000, Window: "day"}, false); err != nil {
		t.Fatal(err)
	}
	admit := budgets.NewAdmitter()
	s.local = clock.NewFake(time.Now().Add(-20 * time.Minute)) // the laptop's clock
	if err := s.Reserve(ctx, ledger.Reservation{RequestID: "laptop", Expires: s.local.Now().Add(15 * time.Minute), Operation: "chat", Model: "m"}, admit); err != nil {
		t.Fatal(err)
	}
	s.local = nil // the desk's clock is right
	err := s.Reserve(ctx, ledger.Reservation{RequestID: "desk", Expires: time.Now().Add(15 * time.Minute), Operation: "chat", Model: "m"}, admit)
	if err != nil {
		t.Errorf("a request in flight on a machine 20 minutes behind blocks another's: %v", err)
	}
}
