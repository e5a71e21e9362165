package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/ledger"
)

const week = 7 * 24 * time.Hour

// Learned-cooldown records: a revision per write, a stale revision
// refused, updates keeping creation and expiry, a record absent from its
// expiry on and replaceable then; every process reads the same.
func testLearned(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	other := d.open()
	put := func(l ledger.Ledger, id, state string, expected int64, now time.Time) (int64, error) {
		return l.PutLearned(ctx, id, []byte(state), expected, now, 10, week)
	}
	if _, ok, err := l.GetLearned(ctx, "x", t0); err != nil || ok {
		t.Fatalf("GetLearned on an empty ledger = %v, %v; want absent", ok, err)
	}
	if rev, err := put(l, "x", "s1", 0, t0); err != nil || rev != 1 {
		t.Fatalf("first PutLearned = %d, %v; want revision 1", rev, err)
	}
	if _, err := put(other, "x", "lost", 0, t0); !errors.Is(err, ledger.ErrStaleRevision) {
		t.Errorf("PutLearned expecting no record over revision 1 = %v, want ErrStaleRevision", err)
	}
	if rev, err := put(other, "x", "s2", 1, t0.Add(time.Hour)); err != nil || rev != 2 {
		t.Fatalf("PutLearned over revision 1 = %d, %v; want 2", rev, err)
	}
	if _, err := put(l, "x", "lost", 1, t0.Add(time.Hour)); !errors.Is(err, ledger.ErrStaleRevision) {
		t.Errorf("PutLearned expecting revision 1 over 2 = %v, want ErrStaleRevision", err)
	}
	rec, ok, err := l.GetLearned(ctx, "x", t0.Add(week-time.Millisecond))
	if err != nil || !ok || string(rec.State) != "s2" || rec.Revision != 2 || rec.ID != "x" || !rec.CreatedAt.Equal(t0) || !rec.ExpiresAt.Equal(t0.Add(week)) {
		t.Errorf("GetLearned 1 ms before expiry = %+v, %v, %v; want x, s2, revision 2, created %v, expiring %v (an update keeps both)", rec, ok, err, t0, t0.Add(week))
	}
	if _, ok, err := other.GetLearned(ctx, "x", t0.Add(week)); err != nil || ok {
		t.Errorf("GetLearned at expiry = %v, %v; want absent", ok, err)
	}
	if rev, err := put(other, "x", "fresh", 0, t0.Add(week)); err != nil || rev != 1 {
		t.Errorf("PutLearned of a new record where one expired = %d, %v; want revision 1", rev, err)
	}
}

// At capacity, a new record is refused with ErrCapacity while updates go
// on; expired records are reclaimed and make room.
func testLearnedCapacity(t *testing.T, e Engine) {
	_, l := fresh(t, e)
	put := func(id string, expected int64, now time.Time) (int64, error) {
		return l.PutLearned(ctx, id, []byte("s"), expected, now, 2, time.Hour)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := put(id, 0, t0); err != nil {
			t.Fatalf("PutLearned(%s): %v", id, err)
		}
	}
	if _, err := put("c", 0, t0); !errors.Is(err, ledger.ErrCapacity) {
		t.Errorf("a third record at capacity 2 = %v, want ErrCapacity", err)
	}
	if rev, err := put("a", 1, t0.Add(time.Minute)); err != nil || rev != 2 {
		t.Errorf("an update at capacity = %d, %v; want revision 2", rev, err)
	}
	if _, ok, _ := l.GetLearned(ctx, "c", t0); ok {
		t.Error("the refused record was stored")
	}
	if rev, err := put("c", 0, t0.Add(time.Hour)); err != nil || rev != 1 {
		t.Errorf("a new record once the others expired = %d, %v; want revision 1", rev, err)
	}
}

// A new database takes this binary's schema through Migrate, which is
// idempotent; whether Open migrates it too is the engine's (SQLite: yes;
// PostgreSQL: refused with ErrSchemaTooOld, nothing changed).
func testMigrateEmpty(t *testing.T, e Engine) {
	addr := e.Create(t)
	clk := clock.NewFake(t0)
	d := &db{t: t, e: e, addr: addr, clk: clk}
	if !e.OpenMigrates {
		before := e.Snapshot(t, addr)
		l, err := e.Open(ctx, addr, clk)
		if err == nil {
			l.Close()
		}
		if !errors.Is(err, ledger.ErrSchemaTooOld) {
			t.Fatalf("Open of a database without the schema = %v, want ErrSchemaTooOld", err)
		}
		if after := e.Snapshot(t, addr); !bytes.Equal(before, after) {
			t.Error("Open refused the database but changed it")
		}
		if err := e.Migrate(ctx, addr); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	l := d.open()
	if err := l.PutBudget(ctx, ledger.BudgetRecord{Name: "kept", Kind: "requests", Limit: 1, Window: "day"}, false); err != nil {
		t.Fatal(err)
	}
	d.reserve(l, "r", opDecisions, "m")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Migrate(ctx, addr); err != nil {
		t.Fatalf("Migrate of a current database: %v", err)
	}
	l = d.open()
	if bs, err := l.Budgets(ctx); err != nil || len(bs) != 1 || bs[0].Name != "kept" {
		t.Errorf("budgets after migrating again = %+v, %v; want kept", bs, err)
	}
	if rows := rowsOf(t, l); len(rows) != 1 {
		t.Errorf("rows after migrating again = %v, want r", ids(rows))
	}
}

// Several processes migrating one new database at once all succeed and
// leave one schema.
func testConcurrentMigrate(t *testing.T, e Engine) {
	addr := e.Create(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.Migrate(ctx, addr)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d of 4 at once: %v", i, err)
		}
	}
	d := &db{t: t, e: e, addr: addr, clk: clock.NewFake(t0)}
	l := d.open()
	d.reserve(l, "r", opDecisions, "m")
	if rows := rowsOf(t, l); len(rows) != 1 {
		t.Errorf("rows = %v, want r", ids(rows))
	}
}

// A database written by a newer rotor is refused by Open and Migrate with
// ErrSchemaTooNew, and left exactly as it was.
func testNewerSchema(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	d.reserve(l, "r", opDecisions, "m")
	if err := l.PutBudget(ctx, ledger.BudgetRecord{Name: "kept", Kind: "requests", Limit: 1, Window: "day"}, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	e.SetSchemaVersion(t, d.addr, e.SchemaVersion+1)
	before := e.Snapshot(t, d.addr)
	if len(before) == 0 {
		t.Fatal("Snapshot is empty")
	}
	nl, err := e.Open(ctx, d.addr, d.clk)
	if err == nil {
		nl.Close()
	}
	if !errors.Is(err, ledger.ErrSchemaTooNew) {
		t.Errorf("Open of a newer schema = %v, want ErrSchemaTooNew", err)
	}
	if err := e.Migrate(ctx, d.addr); !errors.Is(err, ledger.ErrSchemaTooNew) {
		t.Errorf("Migrate of a newer schema = %v, want ErrSchemaTooNew", err)
	}
	if after := e.Snapshot(t, d.addr); !bytes.Equal(before, after) {
		t.Error("the refused database was changed")
	}
	// Back at this binary's version, everything is there.
	e.SetSchemaVersion(t, d.addr, e.SchemaVersion)
	l = d.open()
	if rows := rowsOf(t, l); len(rows) != 1 {
		t.Errorf("rows = %v, want r", ids(rows))
	}
	if bs, err := l.Budgets(ctx); err != nil || len(bs) != 1 {
		t.Errorf("budgets = %+v, %v; want kept", bs, err)
	}
}

// ledger copy's ImportLearned keeps PutLearned's bounds: a target that
// other machines already filled took every imported record (1,034 live
// records against a capacity of 1,024, new identities then refused for up
// to seven days), and records past their expiry or living longer than the
// retention came in as they were.
func testImportLearnedBounds(t *testing.T, e Engine) {
	_, l := fresh(t, e)
	imp := capability[ledger.Importer](t, l)
	if _, err := l.PutLearned(ctx, "theirs", []byte("s"), 0, t0, 3, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := l.PutLearned(ctx, "stale", []byte("s"), 0, t0.Add(-2*time.Hour), 3, time.Hour); err != nil {
		t.Fatal(err)
	}
	rec := func(id string, created, expires time.Time) ledger.LearnedRecord {
		return ledger.LearnedRecord{ID: id, State: []byte("s"), Revision: 1, CreatedAt: created, ExpiresAt: expires}
	}
	recs := []ledger.LearnedRecord{
		rec("expired", t0.Add(-3*time.Hour), t0.Add(-time.Minute)),
		rec("long", t0, t0.Add(48*time.Hour)), // past created + retention
		rec("one", t0, t0.Add(time.Hour)),
		rec("two", t0, t0.Add(time.Hour)), // over capacity: "stale" expired, "theirs", "long", "one" live
	}
	n, err := imp.ImportLearned(ctx, recs, t0, 3, time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("ImportLearned = %d, %v; want 2 (long and one: expired skipped, two over capacity)", n, err)
	}
	for id, want := range map[string]bool{"theirs": true, "long": true, "one": true, "two": false, "expired": false} {
		if _, ok, err := l.GetLearned(ctx, id, t0); err != nil || ok != want {
			t.Errorf("GetLearned(%s) = %v, %v; want stored %v", id, ok, err, want)
		}
	}
	if r, ok, _ := l.GetLearned(ctx, "long", t0); ok && !r.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("long expires at %v, want its creation plus the retention, %v", r.ExpiresAt, t0.Add(time.Hour))
	}
}

// Learned-state puts from processes (or machines) racing on one ledger:
// of puts that expect the same revision exactly one is stored, the others
// refused as stale (no lost update), and records created at once never
// pass the capacity.
func testLearnedConcurrentPuts(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	handles := []ledger.Ledger{l}
	for range 3 {
		handles = append(handles, d.open())
	}
	const racers = 8
	race := func(put func(i int, h ledger.Ledger) error) (ok int, errs []error) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := put(i, handles[i%len(handles)])
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					ok++
				} else {
					errs = append(errs, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		return ok, errs
	}
	if _, err := l.PutLearned(ctx, "x", []byte("s"), 0, t0, 100, week); err != nil {
		t.Fatal(err)
	}
	for rev := int64(1); rev <= 5; rev++ {
		ok, errs := race(func(i int, h ledger.Ledger) error {
			_, err := h.PutLearned(ctx, "x", []byte{byte(i)}, rev, t0, 100, week)
			return err
		})
		if ok != 1 {
			t.Fatalf("%d puts expecting revision %d stored, want exactly 1 (a lost update)", ok, rev)
		}
		for _, err := range errs {
			if !errors.Is(err, ledger.ErrStaleRevision) {
				t.Errorf("a losing put = %v, want ErrStaleRevision", err)
			}
		}
		if r, found, err := l.GetLearned(ctx, "x", t0); err != nil || !found || r.Revision != rev+1 {
			t.Fatalf("after the race on revision %d: %+v, %v, %v; want revision %d", rev, r, found, err, rev+1)
		}
	}
	const capacity = 4
	for round := range 5 {
		race(func(i int, h ledger.Ledger) error {
			_, err := h.PutLearned(ctx, fmt.Sprintf("r%d-%d", round, i), []byte("s"), 0, t0, capacity, week)
			return err
		})
	}
	live := 0
	for round := range 5 {
		for i := range racers {
			if _, found, err := l.GetLearned(ctx, fmt.Sprintf("r%d-%d", round, i), t0); err != nil {
				t.Fatal(err)
			} else if found {
				live++
			}
		}
	}
	if live+1 > capacity { // +1: "x"
		t.Errorf("%d live records after racing creations, capacity %d", live+1, capacity)
	}
}
