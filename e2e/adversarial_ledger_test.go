package e2e

// The adversarial suite, the ledger under faults (issue 8): its lock held
// by another connection (case 10) and kill -9 at random moments and at the
// three failpoints of the request path (case 11). Disk full (case 12) is in
// adversarial_diskfull_linux_test.go.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/failpoint"
	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/testutil"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
)

// holdLedgerLock takes SQLite's write lock on the database from another
// connection (BEGIN IMMEDIATE), as another rotor process or a sqlite3
// shell would, and returns the func that commits and releases it.
func holdLedgerLock(t *testing.T, path string) (release func()) {
	t.Helper()
	s, err := ledger.Open(context.Background(), path, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db := ledgertest.DB(t, path)
	return testutil.HoldWriteLock(t, db, func() error { db.Close(); return s.Close() })
}

// Case 10. SQLite's write lock held by another connection: admissions
// wait for it and succeed when it is released within busy_timeout; beyond
// busy_timeout every one fails closed with 503 ledger_unavailable (each
// within about one busy_timeout, not one per request queued) and nothing is
// sent to the provider without a ledger entry.
func TestAdversarialLedgerLockHeldAdmissionsWaitThenFailClosed(t *testing.T) {
	const busy = time.Second
	e := newE2E(t)
	prov, b, tok := advBridge(e, "deadline: 10s", "ledger: {busy_timeout: 1s}\n")
	const n = 10
	send := func() (chan httpReply, *atomic.Int32) {
		out := make(chan httpReply, n)
		var done atomic.Int32
		for range n {
			go func() {
				r, err := tryCall(context.Background(), "POST", b.url+"/v1/decisions", tok, decideBody)
				if err != nil {
					r = httpReply{status: -1, body: err.Error()}
				}
				done.Add(1)
				out <- r
			}()
		}
		return out, &done
	}

	t.Run("released within busy_timeout", func(t *testing.T) {
		hits, rows := prov.Hits(fp.PathDecisions), len(readLedger(t, e.db()).rows)
		release := holdLedgerLock(t, e.db())
		out, done := send()
		// The other connection works for a while under its lock.
		time.Sleep(busy / 2)
		if d := done.Load(); d != 0 {
			t.Errorf("%d requests were answered while another connection held the ledger's lock", d)
		}
		release()
		for range n {
			if r := <-out; r.status != 200 {
				t.Errorf("after the lock was released: %d %s, want 200", r.status, r.body)
			}
		}
		if got := prov.Hits(fp.PathDecisions) - hits; got != n {
			t.Errorf("provider decisions = %d, want %d", got, n)
		}
		if got := len(readLedger(t, e.db()).rows) - rows; got != n {
			t.Errorf("%d new ledger rows, want %d", got, n)
		}
	})
	t.Run("held beyond busy_timeout", func(t *testing.T) {
		hits, rows := prov.Hits(fp.PathDecisions), len(readLedger(t, e.db()).rows)
		release := holdLedgerLock(t, e.db())
		start := time.Now()
		out, _ := send()
		for range n {
			r := <-out
			if r.status != 503 || errCode(r.body) != httpx.CodeLedgerUnavailable || r.header.Get("Retry-After") == "" {
				t.Errorf("ledger locked: %d %s, want 503 ledger_unavailable with Retry-After", r.status, r.body)
			}
		}
		if took := time.Since(start); took > 3*busy+2*time.Second {
			t.Errorf("%d admissions took %v to fail, want about one busy_timeout (%v)", n, took, busy)
		}
		if got := prov.Hits(fp.PathDecisions) - hits; got != 0 {
			t.Errorf("%d requests reached the provider without a ledger entry", got)
		}
		release()
		if got := len(readLedger(t, e.db()).rows) - rows; got != 0 {
			t.Errorf("%d ledger rows from refused admissions", got)
		}
		if r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody); r.status != 200 {
			t.Errorf("after the lock was released: %d %s", r.status, r.body)
		}
	})
}

// crashSeed is the seed of the random kill moments: ROTOR_ADVERSARIAL_SEED
// or the clock; the test logs it so a failure can be replayed.
func crashSeed(t *testing.T) uint64 {
	if s := os.Getenv("ROTOR_ADVERSARIAL_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ROTOR_ADVERSARIAL_SEED: %v", err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// Case 11. kill -9 crash loop: the bridge under load is killed at random
// (seeded) moments, 10 times (60 in the long variant), and at each of the
// three failpoints of the request path: after the admission commit, during
// the upstream call, after the answer before settlement. After every
// restart: PRAGMA integrity_check is ok; every request the provider
// received has exactly one ledger row; every settled row was received by
// the provider; the rollups that budgets read count each row once; open
// reservations left by the dead process count as requests in the budgets,
// of unknown usage (never zero) in the rollups, and as rows of unknown
// usage in a tokens budget once their deadline and grace have passed.
func TestAdversarialKill9CrashLoopNoUsageLostOrCountedTwice(t *testing.T) {
	cycles, loadedFailpointRounds := 10, 0
	if advLong() {
		cycles, loadedFailpointRounds = 60, 5
	}
	seed := crashSeed(t)
	t.Logf("kill moments seed %d (ROTOR_ADVERSARIAL_SEED=%d repeats them)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	// Built with the failpoints, which release binaries leave out.
	e := newE2E(t, failpointTag)
	prov, _ := advProvider(e, "deadline: 5s", "")
	// A provider that takes a moment, so that kills land while requests
	// are in flight.
	prov.SetDefault("", "", fp.Delay(10*time.Millisecond, fp.OK()))
	e.mustRun("budget", "add", "--requests", "100000000", "--window", "day", "--name", "all-requests")
	e.mustRun("budget", "add", "--tokens", "100000000000", "--window", "day", "--name", "all-tokens")
	base := e.env
	startBridge := func(point string) *proc {
		t.Helper()
		e.env = base
		if point != "" {
			e.env = append(slices.Clone(base), failpoint.Env+"="+point)
		}
		defer func() { e.env = base }()
		return e.start("bridge", "start", "--listen", "127.0.0.1:0")
	}
	check := func(when string) ledgerView {
		t.Helper()
		v := readLedger(t, e.db())
		if v.integrity != "ok" {
			t.Fatalf("%s: PRAGMA integrity_check = %q", when, v.integrity)
		}
		logged := map[string]bool{}
		for _, id := range requestIDs(prov) {
			logged[id] = true
			if _, ok := v.byID[id]; !ok {
				t.Errorf("%s: the provider received request %s; the ledger has no row for it", when, id)
			}
		}
		for _, r := range v.rows {
			if r.Settled && !logged[r.RequestID] {
				t.Errorf("%s: settled row %s for a request the provider never received", when, r.RequestID)
			}
		}
		if v.totals.Requests != int64(len(v.rows)) || v.totals.TokensUnknown != int64(v.unknown) {
			t.Errorf("%s: rollups count %d requests, %d of unknown tokens; the rows are %d, %d of unknown tokens",
				when, v.totals.Requests, v.totals.TokensUnknown, len(v.rows), v.unknown)
		}
		for _, bud := range parseJSON(t, e.mustRun("budget", "list", "--format", "json").stdout) {
			switch bud["name"] {
			case "all-requests":
				if bud["used"] != float64(len(v.rows)) {
					t.Errorf("%s: requests budget used %v, want every row (%d, %d open)", when, bud["used"], len(v.rows), v.open)
				}
			case "all-tokens":
				// A reservation the dead left is a request in flight until
				// its deadline and grace pass (minutes here), then a row
				// of unknown usage (DESIGN, Prices and cost).
				inFlight := 0
				for _, r := range v.rows {
					if !r.Settled && r.Expires.After(time.Now().Add(time.Minute)) {
						inFlight++
					}
				}
				if bud["unknown_rows"] != float64(v.unknown-inFlight) {
					t.Errorf("%s: tokens budget counts %v rows of unknown usage, want %d (%d, less %d reservations in flight)",
						when, bud["unknown_rows"], v.unknown-inFlight, v.unknown, inFlight)
				}
			}
		}
		return v
	}
	// load runs four clients against url until stop; stop returns how many
	// were answered 200.
	load := func(url, tok string) (stop func() int) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var ok atomic.Int64
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					r, err := tryCall(ctx, "POST", url+"/v1/decisions", tok, decideBody)
					if err != nil {
						return
					}
					if r.status == 200 {
						ok.Add(1)
					}
				}
			}()
		}
		return func() int { cancel(); wg.Wait(); return int(ok.Load()) }
	}

	b := startBridge("")
	tok := e.token()
	v := check("first start")
	served := 0
	for i := range cycles {
		stop := load(b.url, tok)
		// The random moment.
		time.Sleep(time.Duration(10+rng.IntN(250)) * time.Millisecond)
		b.kill9()
		served += stop()
		b = startBridge("")
		v = check(fmt.Sprintf("restart %d after a random kill", i+1))
	}
	if served == 0 {
		t.Error("no request was served between the kills: the load never ran")
	}

	// Each failpoint, one request at a time: exactly what the dead process
	// left is known.
	for _, point := range failpoint.Points {
		b.kill9()
		hits := prov.Hits(fp.PathDecisions)
		b = startBridge(point)
		if r, err := tryCall(context.Background(), "POST", b.url+"/v1/decisions", tok, decideBody); err == nil {
			t.Errorf("%s: answered %d %s; the process should have died first", point, r.status, r.body)
		}
		err := b.waitExit(10 * time.Second)
		if ee, ok := err.(interface{ Sys() any }); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("%s: the bridge ended with %v, want SIGKILL at the failpoint\n%s", point, err, b.stderr)
		}
		b = startBridge("")
		after := check("restart after failpoint " + point)
		var added []ledger.Row
		for _, r := range after.rows {
			if _, old := v.byID[r.RequestID]; !old {
				added = append(added, r)
			}
		}
		wantHits := 1
		if point == failpoint.AfterAdmission {
			wantHits = 0
		}
		if got := prov.Hits(fp.PathDecisions) - hits; got != wantHits {
			t.Errorf("%s: %d provider calls, want %d", point, got, wantHits)
		}
		if len(added) != 1 || added[0].Settled || added[0].TotalTokens.Known {
			t.Errorf("%s: new rows %+v, want one open reservation of unknown usage", point, added)
		} else if ids := requestIDs(prov); wantHits == 1 && ids[len(ids)-1] != added[0].RequestID {
			t.Errorf("%s: the open reservation is %s, the provider ran %s", point, added[0].RequestID, ids[len(ids)-1])
		}
		v = after
	}
	// The long variant also hits each failpoint under load.
	for round := range loadedFailpointRounds {
		for _, point := range failpoint.Points {
			b.kill9()
			b = startBridge(point)
			stop := load(b.url, tok)
			b.waitExit(30 * time.Second)
			stop()
			b = startBridge("")
			v = check(fmt.Sprintf("round %d, restart after failpoint %s under load", round+1, point))
		}
	}
	if r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody); r.status != 200 {
		t.Errorf("after the crash loop: %d %s", r.status, r.body)
	}
	v = check("end")
	t.Logf("%d rows, %d open reservations left by kills, %d requests answered 200 under load", len(v.rows), v.open, served)
	if v.open == 0 {
		t.Error("no kill left an open reservation: the failpoints did not strike")
	}
}
