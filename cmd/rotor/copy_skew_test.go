package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil/pgtest"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/ledger/pgledger"
)

// `rotor ledger copy` from a team's PostgreSQL ledger, run on a machine
// whose clock is 10 minutes ahead of the database's. README: a request
// still in flight (a reservation within its deadline plus grace) is not
// copied; times on a PostgreSQL ledger come from the database's clock, so
// machines with skewed clocks agree. A bridge's request that is in flight
// right now (deadline 2m + grace 5m) must not be copied as an abandoned
// reservation.
func TestCopyFromPostgresWithSkewedClockSkipsInFlight(t *testing.T) {
	ctx := context.Background()
	base, _ := pgtest.Schema(t)
	if _, _, err := pgledger.Migrate(ctx, base, pgledger.Options{}); err != nil {
		t.Fatal(err)
	}
	src, err := pgledger.Open(ctx, base, pgledger.Options{}) // the database's clock, as a bridge
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// A bridge on a machine with a correct clock admits a request now.
	if err := src.Reserve(ctx, ledger.Reservation{RequestID: "running", Operation: "responses", Model: "gpt", Client: "ci",
		Expires: time.Now().Add(2*time.Minute + 5*time.Minute)}, nil); err != nil {
		t.Fatal(err)
	}
	f, _, errOut := fakeFactory(t, nil, nil)
	f.Clock = clock.NewFake(time.Now().Add(10 * time.Minute)) // the copier's clock, 10 minutes ahead
	target := filepath.Join(t.TempDir(), "laptop.db")
	opts := &copyOptions{IO: f.IO, From: func(context.Context) (ledger.Ledger, error) { return src, nil }, To: f.openCopyTarget,
		Source: func() (string, error) { return base, nil }, URL: target}
	if err := copyRun(ctx, opts); err != nil {
		t.Fatal(err)
	}
	dst := copiedTo(t, f, target)
	rows, err := dst.Rows(ctx, time.Unix(0, 0), time.Now().Add(time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 0 || !strings.Contains(errOut.String(), "still in flight") {
		t.Errorf("a request in flight on the source was copied (%d rows on the target, settled=%v) without the in-flight warning (stderr %q): "+
			"it stays an unsettled row of unknown usage there once it settles on the source", len(rows), len(rows) > 0 && rows[0].Settled, errOut)
	}
}
