package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/internal/dburl"
	"github.com/rotorhq/rotor/ledger"
)

// The README's exit-status contract, class by class, however deeply the
// error that decides it is wrapped: 2 for what the user fixes in the
// command or the setup (a usage error, a config key, an older schema, a
// ledger URL the driver cannot use, a ledger folder that does not exist),
// 1 for anything else (a newer schema, a cancelled command, a plain
// failure), and a silent error's own code.
func TestExitCodeContract(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("budget list: %w", err) }
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"ok", nil, ExitOK},
		{"silent", wrap(&SilentError{Code: 3}), 3},
		{"usage", wrap(usageErrorf("--window %q: want a duration", "x")), ExitUsage},
		{"config key", wrap(&config.FieldError{Field: "ledger.url", Err: errors.New("bad")}), ExitUsage},
		{"older schema", wrap(fmt.Errorf("schema version 3: %w", ledger.ErrSchemaTooOld)), ExitUsage},
		{"ledger URL", wrap(dburl.Errorf(dburl.ErrURL, "%q is not a URL the driver can use", "postgres://db/x?sslmode=nope")), ExitUsage},
		{"no folder", wrap(fmt.Errorf("/missing/rotor.db: %w", ledger.ErrNoFolder)), ExitUsage},
		{"newer schema", wrap(&ledger.SchemaError{Path: "rotor.db", Have: 99, Know: 1}), ExitError},
		{"cancelled", wrap(context.Canceled), ExitError},
		{"plain", errors.New("disk I/O error"), ExitError},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("%s: exitCode(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}

// A --db URL the PostgreSQL driver would read otherwise (an @ in the
// password, not percent-encoded) exits 2 before anything connects, naming
// --db and never a piece of the password.
func TestBadDBURLExitsUsageWithoutThePassword(t *testing.T) {
	f, out, errOut := testFactory(t)
	code := run(context.Background(), f, []string{"--db", "postgres://alice:Zq9s@ekritPW@127.0.0.1:1/rotor", "budget", "list"})
	if code != ExitUsage {
		t.Errorf("exit %d, want 2; stderr %q", code, errOut)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q, want nothing", out)
	}
	msg := errOut.String()
	if !strings.Contains(msg, "--db") {
		t.Errorf("stderr %q does not name --db", msg)
	}
	for _, part := range []string{"Zq9s", "ekritPW"} {
		if strings.Contains(msg, part) {
			t.Errorf("stderr %q shows part of the password (%q)", msg, part)
		}
	}
}
