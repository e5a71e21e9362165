package main

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/dburl"
	"github.com/rotorhq/rotor/internal/testutil/pgtest"
	"github.com/rotorhq/rotor/internal/tokenfile"
	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/ledger/pgledger"
)

func init() {
	runFTests["ledger migrate"] = func(t *testing.T) {
		f, _, _ := testFactory(t)
		if got := flagsToOptions(t, f, newCmdLedgerMigrate); got.Migrate == nil || got.IO != f.IO {
			t.Errorf("options %+v, want the factory's migrate and streams", got)
		}
	}
	runFTests["ledger copy"] = func(t *testing.T) {
		f, _, _ := testFactory(t)
		const url = "postgres://rotor:pw@db.example/rotor?sslmode=require"
		if got := flagsToOptions(t, f, newCmdLedgerCopy, "--to", url); got.URL != url || got.From == nil || got.To == nil {
			t.Errorf("options %+v, want --to in URL", got)
		}
		refused(t, f, newCmdLedgerCopy, "--to is required")
	}
}

// Homes sharing one ledger never take over each other's token label: the
// first gets default, the next default@<hostname>, a second home on the
// same machine default@<hostname>-2; a copied bridge.token is kept.
func TestInitOnSharedLedgerKeepsOneLabelPerHome(t *testing.T) {
	ctx := context.Background()
	shared := filepath.Join(t.TempDir(), "shared.db")
	type home struct {
		f   *Factory
		out fmt.Stringer
	}
	newHome := func() home {
		f, out, _ := fakeFactory(t, nil, nil)
		f.DBPath = func() (string, error) { return shared, nil }
		return home{f, out}
	}
	initHome := func(h home, force bool) {
		t.Helper()
		opts := &initOptions{IO: h.f.IO, EnsureHome: h.f.EnsureHome, ConfigPath: h.f.ConfigPath, Ledger: h.f.initLedger,
			Hostname: func() (string, error) { return "box 7", nil }, Force: force}
		if err := initRun(ctx, opts); err != nil {
			t.Fatal(err)
		}
	}
	labelOf := func(h home) string {
		t.Helper()
		dir, _ := h.f.Home()
		tok, err := tokenfile.Read(filepath.Join(dir, "bridge.token"))
		if err != nil {
			t.Fatal(err)
		}
		store, err := h.f.Ledger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		label, ok, err := store.LookupToken(ctx, tok.Hash())
		if err != nil || !ok {
			return ""
		}
		return label
	}
	a, b, c := newHome(), newHome(), newHome()
	for i, h := range []home{a, b, c} {
		initHome(h, false)
		if got, want := labelOf(h), []string{"default", "default@box-7", "default@box-7-2"}[i]; got != want {
			t.Errorf("home %d: bridge.token stored as %q, want %q", i, got, want)
		}
	}
	if !strings.Contains(b.out.String(), `client token "default@box-7"`) {
		t.Errorf("init printed %q, want it to name the label", b.out)
	}
	// --force replaces a home's own token under its own label.
	initHome(b, true)
	if got := labelOf(b); got != "default@box-7" {
		t.Errorf("after init --force: %q, want default@box-7 kept", got)
	}
	if got := labelOf(a); got != "default" {
		t.Errorf("home a's token is %q after b's --force, want default still working", got)
	}
	// A home holding a copy of a's bridge.token (and no rotor.yaml) keeps it.
	d := newHome()
	ddir, _ := d.f.EnsureHome()
	adir, _ := a.f.Home()
	tok, _ := tokenfile.Read(filepath.Join(adir, "bridge.token"))
	if err := tokenfile.Write(filepath.Join(ddir, "bridge.token"), tok, false); err != nil {
		t.Fatal(err)
	}
	initHome(d, false)
	if got := labelOf(d); got != "default" || !strings.Contains(d.out.String(), `kept `) {
		t.Errorf("copied token: stored as %q, init printed %q; want it kept as default", got, d.out)
	}
	store, _ := a.f.Ledger(ctx)
	if toks, _ := store.ClientTokens(ctx); len(toks) != 3 {
		t.Errorf("the ledger holds %d tokens, want 3 (default, default@box-7, default@box-7-2)", len(toks))
	}
}

// fillLedger writes one of everything a ledger keeps.
func fillLedger(t *testing.T, f *Factory, rows int) ledger.Ledger {
	t.Helper()
	ctx := context.Background()
	store, err := f.LedgerOrCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := budgets.Budget{Name: "daily", Kind: budgets.KindRequests, Limit: 50, Window: budgets.Window{Calendar: "day"}, CreatedAt: f.Clock.Now()}
	if err := store.PutBudget(ctx, b.Record(), false); err != nil {
		t.Fatal(err)
	}
	if err := store.AddClientToken(ctx, "ci", tokenfile.Generate().Hash(), false); err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutPrices(ctx, []ledger.Price{{Model: "gpt", InputMicros: 1_000_000, OutputMicros: 2_000_000, Source: ledger.SourceSet}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutLearned(ctx, "api|gpt", []byte(`{"s":1}`), 0, f.Clock.Now(), 10, learned.Retention); err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		id := fmt.Sprintf("req-%03d", i)
		if err := store.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: "responses", Model: "gpt", Client: "ci", Expires: f.Clock.Now()}, nil); err != nil {
			t.Fatal(err)
		}
		if err := store.Settle(ctx, ledger.Settlement{RequestID: id, Model: "gpt", Status: 200, InputTokens: ledger.Known(100), OutputTokens: ledger.Known(10), TotalTokens: ledger.Known(110)}); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

func TestLedgerCopyRun(t *testing.T) {
	ctx := context.Background()
	f, out, _ := fakeFactory(t, nil, nil)
	src := fillLedger(t, f, 25)
	f.Clock.(*clock.Fake).Advance(time.Hour) // the copy comes later: tokens keep their times
	target := filepath.Join(t.TempDir(), "team.db")
	opts := &copyOptions{IO: f.IO, From: f.Ledger, To: f.openCopyTarget, Source: f.DBPath, URL: target, PageRows: 4}
	if err := copyRun(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if want := "copied to " + target + ": 25 rows (0 already there), 1 budgets, 1 tokens, 1 prices, 1 learned records\n"; out.String() != want {
		t.Errorf("copy printed %q, want %q", out, want)
	}
	dst := copiedTo(t, f, target)
	q := ledger.ReportQuery{From: f.Clock.Now().Add(-time.Hour), To: f.Clock.Now().Add(time.Hour), By: []string{"model", "client"}}
	want, _ := src.Report(ctx, q)
	got, err := dst.Report(ctx, q)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("target report %+v (%v), want the source's %+v", got, err, want)
	}
	st, _ := src.ClientTokens(ctx)
	for _, tok := range st {
		if label, ok, _ := dst.LookupToken(ctx, tok.Hash); !ok || label != tok.Label {
			t.Errorf("token %s does not work on the target (%q %v)", tok.Label, label, ok)
		}
	}
	if dt, err := dst.ClientTokens(ctx); err != nil || fmt.Sprint(dt) != fmt.Sprint(st) {
		t.Errorf("target tokens %+v (%v), want the source's, times included: %+v", dt, err, st)
	}
	dst.Close()

	// Again: nothing added, and it says so.
	out.Reset()
	if err := copyRun(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if want := "nothing to copy: " + target + " already holds all 25 rows, the budgets, tokens, prices and learned state\n"; out.String() != want {
		t.Errorf("second copy printed %q, want %q", out, want)
	}

	// A target with a budget and a price of the same name but other
	// values: exit 2 listing both, nothing written.
	other := filepath.Join(t.TempDir(), "other.db")
	o := copiedTo(t, f, other)
	b := budgets.Budget{Name: "daily", Kind: budgets.KindRequests, Limit: 7, Window: budgets.Window{Calendar: "day"}, CreatedAt: f.Clock.Now()}
	if err := o.PutBudget(ctx, b.Record(), false); err != nil {
		t.Fatal(err)
	}
	if _, err := o.PutPrices(ctx, []ledger.Price{{Model: "gpt", InputMicros: 3, OutputMicros: 3, Source: ledger.SourceSet}}, false); err != nil {
		t.Fatal(err)
	}
	o.Close()
	opts.URL = other
	err = copyRun(ctx, opts)
	wantUsageError(t, "conflicting copy", err, "2 item(s)")
	for _, want := range []string{"budget daily", "price gpt"} {
		if !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("conflict error %q does not list %q", err, want)
		}
	}
	o, _ = f.openCopyTarget(ctx, other)
	defer o.Close()
	if rows, _ := o.Rows(ctx, time.UnixMilli(0), f.Clock.Now().Add(time.Hour), 0); len(rows) != 0 {
		t.Errorf("a refused copy wrote %d rows", len(rows))
	}
	if toks, _ := o.ClientTokens(ctx); len(toks) != 0 {
		t.Errorf("a refused copy wrote %d tokens", len(toks))
	}

	// Onto itself: refused.
	self, _ := f.DBPath()
	opts.URL = self
	wantUsageError(t, "copy onto itself", copyRun(ctx, opts), "is the current ledger")
}

// A request in flight while the copy runs is not copied, and the copy
// says so: a row moves once, so one copied open would stay open on the
// target after it settled on the source. Copied again once it settled,
// the target has its real usage.
func TestLedgerCopySkipsRequestsInFlight(t *testing.T) {
	ctx := context.Background()
	f, out, errOut := fakeFactory(t, nil, nil)
	src := fillLedger(t, f, 5)
	if err := src.Reserve(ctx, ledger.Reservation{RequestID: "running", Operation: "chat", Pool: "api", Model: "m", Client: "ci", Expires: f.Clock.Now().Add(10 * time.Minute)}, nil); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "team.db")
	opts := &copyOptions{IO: f.IO, From: f.Ledger, To: f.openCopyTarget, Source: f.DBPath, URL: target}
	if err := copyRun(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "not copied: 1 requests still in flight") || !strings.Contains(out.String(), ": 5 rows") {
		t.Errorf("copy beside a request in flight printed %q, %q; want 5 rows copied and a warning for 1 in flight", out, errOut)
	}
	// Again while it runs: the target does not hold every row yet, so the
	// copy must not say "nothing to copy".
	out.Reset()
	errOut.Reset()
	if err := copyRun(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "nothing to copy") || !strings.Contains(errOut.String(), "not copied: 1 requests still in flight") {
		t.Errorf("second copy while a request runs printed %q, %q; want no \"nothing to copy\", and the warning", out, errOut)
	}
	if err := src.Settle(ctx, ledger.Settlement{RequestID: "running", Model: "m", Status: 200, Attempts: 1,
		InputTokens: ledger.Known(10), OutputTokens: ledger.Known(5), TotalTokens: ledger.Known(15)}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if err := copyRun(ctx, opts); err != nil {
		t.Fatal(err)
	}
	dst := copiedTo(t, f, target)
	r, ok, err := dst.(ledger.RowLookup).RowByID(ctx, "running")
	if err != nil || !ok || !r.Settled || r.TotalTokens != ledger.Known(15) || errOut.Len() != 0 {
		t.Errorf("the settled request on the target after a second copy: %+v %v %v (stderr %q); want settled with 15 tokens", r, ok, err, errOut)
	}
}

// copyRows pages through rows that share a millisecond without losing or
// repeating any.
func TestCopyRowsPagesThroughOneMillisecond(t *testing.T) {
	ctx := context.Background()
	f, _, _ := fakeFactory(t, nil, nil)
	src := fillLedger(t, f, 9) // the fake clock stands still: one millisecond
	g, _, _ := fakeFactory(t, nil, nil)
	dst, err := g.LedgerOrCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	added, seen, _, err := copyRows(ctx, src, dst.(ledger.Importer), 2, f.Clock.Now())
	if err != nil || added != 9 || seen != 9 {
		t.Errorf("copyRows = %d added, %d seen, %v; want 9 and 9", added, seen, err)
	}
}

// Migrate opens an existing SQLite ledger and prints its version; where
// there is none (a mistyped --home) it exits 2 and creates nothing.
func TestLedgerMigrateRunOnSQLite(t *testing.T) {
	ctx := context.Background()
	f, out, _ := fakeFactory(t, nil, nil)
	home, _ := f.Home()
	wantUsageError(t, "migrate without a ledger", migrateRun(ctx, &migrateOptions{IO: f.IO, Migrate: f.migrateLedger}), home)
	if _, err := os.Stat(home); err == nil {
		t.Errorf("migrate without a ledger created %s", home)
	}
	if _, err := f.LedgerOrCreate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := migrateRun(ctx, &migrateOptions{IO: f.IO, Migrate: f.migrateLedger}); err != nil {
		t.Fatal(err)
	}
	path, _ := f.DBPath()
	if !strings.HasPrefix(out.String(), path+": schema version ") || !strings.Contains(out.String(), "SQLite upgrades itself") {
		t.Errorf("migrate printed %q", out)
	}
}

// ledger migrate says what it did: an empty PostgreSQL schema (version 0)
// is migrated, not "upgraded when opened", which only SQLite (From -1) is.
func TestLedgerMigrateRunSaysWhatItDid(t *testing.T) {
	for _, tt := range []struct {
		m    migration
		want string
	}{
		{migration{Where: "rotor.db", From: -1, To: 7}, "rotor.db: schema version 7 (SQLite upgrades itself when opened)\n"},
		{migration{Where: "postgres://h/db", From: 0, To: 7}, "postgres://h/db: migrated schema version 0 to 7\n"},
		{migration{Where: "postgres://h/db", From: 6, To: 7}, "postgres://h/db: migrated schema version 6 to 7\n"},
		{migration{Where: "postgres://h/db", From: 7, To: 7}, "postgres://h/db: schema version 7, already current\n"},
	} {
		f, out, _ := fakeFactory(t, nil, nil)
		err := migrateRun(context.Background(), &migrateOptions{IO: f.IO, Migrate: func(context.Context) (migration, error) { return tt.m, nil }})
		if err != nil || out.String() != tt.want {
			t.Errorf("migrate %+v: %v, printed %q, want %q", tt.m, err, out, tt.want)
		}
	}
}

// An older or empty shared schema exits 2 and says to migrate; the
// database is named with its password masked, even when the engine's error
// held it.
func TestLedgerOpenErrExitsAndMasks(t *testing.T) {
	const url = "postgres://alice:Zq9sekrit@db.example:5432/rotor?sslmode=require"
	for _, tc := range []struct {
		name string
		err  error
		exit int
	}{
		{"older schema", fmt.Errorf("schema version 3: %w", ledger.ErrSchemaTooOld), ExitUsage},
		{"newer schema", &ledger.SchemaError{Path: url, Have: 99, Know: 1}, ExitError},
		{"unreachable", errors.New("dial " + url + ": connection refused (password Zq9sekrit)"), ExitError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ledgerOpenErr(url, tc.err)
			if got := exitCode(err); got != tc.exit {
				t.Errorf("exit %d, want %d", got, tc.exit)
			}
			msg := err.Error()
			if strings.Contains(msg, "Zq9sekrit") || !strings.Contains(msg, "postgres://alice:xxxxx@db.example:5432/rotor") {
				t.Errorf("message %q: want the masked URL and no password", msg)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("errors.Is lost the cause")
			}
		})
	}
	if strings.Contains(ledgerOpenErr(url, errors.New("x")).Error(), "rotor migrate") {
		t.Error("a plain error should not advise migrating")
	}
}

func TestScrubURLTakesOutEveryPassword(t *testing.T) {
	for _, url := range []string{
		"postgres://alice:Zq9sekrit@db/rotor",
		"postgresql://alice@db/rotor?password=Zq9sekrit&sslmode=disable",
		"postgres://alice:Zq9%73ekrit@db/rotor",
	} {
		msg := scrubURL("failed: "+url+" (pw Zq9sekrit)", url)
		if strings.Contains(msg, "Zq9sekrit") || strings.Contains(msg, "Zq9%73ekrit") {
			t.Errorf("scrubURL(%q) = %q still holds the password", url, msg)
		}
	}
	if got := scrubURL("a /tmp/x.db b", "/tmp/x.db"); got != "a /tmp/x.db b" {
		t.Errorf("a SQLite path was changed: %q", got)
	}
}

// withPassword puts a password in a test server URL: the server's trust
// authentication accepts any, so every output can be searched for it.
func withPassword(t *testing.T, dbURL, pw string) string {
	t.Helper()
	u, err := neturl.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.UserPassword(u.User.Username(), pw)
	return u.String()
}

// The same copy into PostgreSQL: migrated when empty, idempotent, and the
// password never printed.
func TestLedgerCopyToPostgres(t *testing.T) {
	ctx := context.Background()
	base, _ := pgtest.Schema(t)
	target := withPassword(t, base, "Zq9sekrit")
	f, out, errOut := fakeFactory(t, nil, nil)
	src := fillLedger(t, f, 30)
	opts := &copyOptions{IO: f.IO, From: f.Ledger, To: f.openCopyTarget, Source: f.DBPath, URL: target, PageRows: 7}
	if err := copyRun(ctx, opts); err != nil {
		t.Fatal(err)
	}
	masked := dburl.Mask(target)
	if want := "copied to " + masked + ": 30 rows (0 already there), 1 budgets, 1 tokens, 1 prices, 1 learned records\n"; out.String() != want {
		t.Errorf("copy printed %q, want %q", out, want)
	}
	if !strings.Contains(errOut.String(), "migrated schema version 0 to ") {
		t.Errorf("stderr %q: want the empty schema's migration reported", errOut)
	}
	dst := copiedTo(t, f, target)
	q := ledger.ReportQuery{From: f.Clock.Now().Add(-time.Hour), To: f.Clock.Now().Add(time.Hour), By: []string{"model", "client"}}
	want, _ := src.Report(ctx, q)
	if got, err := dst.Report(ctx, q); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("PostgreSQL report %+v (%v), want the source's %+v", got, err, want)
	}
	st, _ := src.ClientTokens(ctx)
	if label, ok, err := dst.LookupToken(ctx, st[0].Hash); err != nil || !ok || label != st[0].Label {
		t.Errorf("copied token: %q %v %v", label, ok, err)
	}
	out.Reset()
	if err := copyRun(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "nothing to copy: "+masked) {
		t.Errorf("second copy printed %q", out)
	}
	for _, s := range []string{out.String(), errOut.String()} {
		if strings.Contains(s, "Zq9sekrit") {
			t.Errorf("output holds the password: %q", s)
		}
	}
}

// init against an empty PostgreSQL schema creates it; another command
// finding an empty or older schema exits 2 saying to migrate.
func TestPostgresSchemaNeedsMigrate(t *testing.T) {
	ctx := context.Background()
	base, _ := pgtest.Schema(t)
	dbURL := withPassword(t, base, "Zq9sekrit")
	f, _, _ := fakeFactory(t, nil, nil)
	f.DBPath = func() (string, error) { return dbURL, nil }
	_, err := f.Ledger(ctx)
	wantUsageError(t, "open an empty schema", err, "rotor ledger migrate")
	if strings.Contains(fmt.Sprint(err), "Zq9sekrit") {
		t.Errorf("error %q holds the password", err)
	}
	g, out, _ := fakeFactory(t, nil, nil)
	g.DBPath = f.DBPath
	if err := migrateRun(ctx, &migrateOptions{IO: g.IO, Migrate: g.migrateLedger}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), ": migrated schema version 0 to ") || strings.Contains(out.String(), "Zq9sekrit") {
		t.Errorf("migrate printed %q", out)
	}
	out.Reset()
	if err := migrateRun(ctx, &migrateOptions{IO: g.IO, Migrate: g.migrateLedger}); err != nil || !strings.Contains(out.String(), "already current") {
		t.Errorf("second migrate: %v, printed %q", err, out)
	}
	h, _, _ := fakeFactory(t, nil, nil)
	h.DBPath = f.DBPath
	if _, err := h.Ledger(ctx); err != nil {
		t.Errorf("open after migrate: %v", err)
	}
}

// The last line of defence: whatever error a command ends with, the
// password of the database URL is taken out of what rotor prints.
func TestRunMasksThePasswordInAnyError(t *testing.T) {
	t.Setenv("ROTOR_LEDGER_CONNECT_TIMEOUT", "1s")
	const dbURL = "postgres://alice:Zq9sekrit@127.0.0.1:1/rotor"
	f, _, errOut := testFactory(t)
	root := NewCmdRoot(f)
	fail := &cobra.Command{Use: "fail", RunE: func(*cobra.Command, []string) error {
		return errors.New("driver said: password Zq9sekrit refused for " + dbURL)
	}}
	root.AddCommand(fail)
	if code := runRoot(context.Background(), f, root, []string{"--db", dbURL, "fail"}); code == 0 {
		t.Errorf("fail exited 0")
	}
	if got := errOut.String(); strings.Contains(got, "Zq9sekrit") || !strings.Contains(got, "postgres://alice:xxxxx@127.0.0.1:1/rotor") {
		t.Errorf("printed %q", got)
	}
	errOut.Reset()
	if code := run(context.Background(), f, []string{"--db", dbURL, "budget", "list"}); code == 0 || strings.Contains(errOut.String(), "Zq9sekrit") {
		t.Errorf("budget list on an unreachable database: exit %d, stderr %q", code, errOut)
	}
}

// A copy of a pruned ledger carries the pruned usage: reports (every
// grouping, ranges starting and ending in pruned time) and budget windows
// over pruned time read the same on the target, SQLite or PostgreSQL, and
// on a copy back from it. Before, the copy stopped with exit 2 (or, with
// --drop-pruned, copied without the pruned usage), so a team moving its
// ledger lost the totals of every pruned day.
func TestLedgerCopyCarriesPrunedUsage(t *testing.T) {
	for _, tc := range copyTargets {
		t.Run(tc.name, func(t *testing.T) {
			f, out, errOut := testFactory(t)
			src, day0 := careLedger(t, f)
			srcPath, _ := f.DBPath()
			if code := runCmd(t, f, out, errOut, "ledger", "prune", "--before", "2026-11-23"); code != 0 {
				t.Fatalf("prune: exit %d %s", code, errOut)
			}
			// Budgets added after the prune count the pruned usage.
			for _, b := range [][]string{{"--requests", "1000", "--window", "30d", "--name", "month"}, {"--tokens", "100000", "--window", "5d", "--name", "five-days"}} {
				if code := runCmd(t, f, out, errOut, append([]string{"budget", "add"}, b...)...); code != 0 {
					t.Fatalf("budget add: exit %d %s", code, errOut)
				}
			}
			kept, err := src.Rows(context.Background(), day0, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), 0)
			if err != nil || len(kept) != 1 {
				t.Fatalf("rows left before the cut: %d (%v), want the unsettled one", len(kept), err)
			}
			clk := f.Clock
			want := ledgerViews(t, srcPath, clk)

			target := tc.target(t)
			if code := runCmd(t, f, out, errOut, "ledger", "copy", "--to", target); code != 0 {
				t.Fatalf("copy of a pruned ledger: exit %d\n%s%s", code, out, errOut)
			}
			if !strings.Contains(out.String(), "copied the pruned usage of ") || !strings.Contains(out.String(), " requests before 2026-11-23T00:00:00Z") || errOut.Len() > 0 && strings.Contains(errOut.String(), "warning") {
				t.Errorf("copy printed %q, stderr %q", out, errOut)
			}
			compareViews(t, "target", ledgerViews(t, target, clk), want)

			if code := runCmd(t, f, out, errOut, "ledger", "copy", "--to", target); code != 0 || !strings.HasPrefix(out.String(), "nothing to copy: ") {
				t.Errorf("second copy: exit %d, printed %q %q; want nothing to copy", code, out, errOut)
			}
			compareViews(t, "target after a second copy", ledgerViews(t, target, clk), want)

			// And back: the target, as the current ledger, copies into a
			// new SQLite file.
			back := filepath.Join(t.TempDir(), "back.db")
			g, gout, gerr := testFactory(t)
			g.Clock = clk
			g.DBPath = func() (string, error) { return target, nil }
			if code := runCmd(t, g, gout, gerr, "--home", t.TempDir(), "ledger", "copy", "--to", back); code != 0 {
				t.Fatalf("copy back: exit %d\n%s%s", code, gout, gerr)
			}
			compareViews(t, "copied back", ledgerViews(t, back, clk), want)
		})
	}
}

// ledgerViews is what `ledger report` (several groupings and ranges, in
// and across pruned time) and `budget list` print for the ledger at path.
func ledgerViews(t *testing.T, path string, clk clock.Clock) []string {
	t.Helper()
	f, out, errOut := testFactory(t)
	f.Clock = clk
	f.DBPath = func() (string, error) { return path, nil }
	if dburl.IsPostgres(path) {
		// On the views' clock, as the SQLite ledgers are (a factory leaves
		// PostgreSQL's times to the database's now()).
		store, err := pgledger.Open(context.Background(), path, pgledger.Options{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		f.store = store
	}
	home := t.TempDir()
	var views []string
	for _, args := range [][]string{
		{"ledger", "report", "--by", "day", "--from", "2026-11-19", "--to", "2026-11-28", "--format", "json"},
		{"ledger", "report", "--by", "model,status", "--from", "2026-11-21T13:30:00Z", "--to", "2026-11-24T02:00:00Z", "--format", "csv"},
		{"ledger", "report", "--by", "credential,client,operation", "--since", "8d", "--format", "json"},
		{"ledger", "report", "--by", "day,model,credential,client,status,operation", "--from", "2026-11-20", "--to", "2026-11-22T11:00:00Z", "--format", "json"},
		{"ledger", "report", "--from", "2026-11-22", "--to", "2026-11-23"},
		{"budget", "list", "--format", "json"},
	} {
		if code := runCmd(t, f, out, errOut, append([]string{"--home", home}, args...)...); code != 0 {
			t.Fatalf("%v on %s: exit %d %s", args, path, code, errOut)
		}
		views = append(views, strings.Join(args, " ")+"\n"+out.String())
	}
	return views
}

func compareViews(t *testing.T, what string, got, want []string) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: %s\nwant %s", what, got[i], want[i])
		}
	}
}

// Pruned usage has no request ids: carried into a ledger that holds usage
// of its own before the cut, it could count twice what is there. The copy
// stops, exit 2, before writing anything; --drop-pruned copies without it
// and warns.
func TestLedgerCopyPrunedIntoOverlappingLedger(t *testing.T) {
	for _, tc := range copyTargets {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f, out, errOut := testFactory(t)
			careLedger(t, f)
			if code := runCmd(t, f, out, errOut, "ledger", "prune", "--before", "2026-11-23"); code != 0 {
				t.Fatalf("prune: exit %d %s", code, errOut)
			}
			target := tc.target(t)
			// The target's own request, before the cut.
			dst, err := f.openCopyTarget(ctx, target)
			if err != nil {
				t.Fatal(err)
			}
			at := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
			theirs := ledger.Row{RequestID: "theirs", Time: at, Expires: at.Add(time.Minute), Settled: true, Operation: "chat", Model: "m", Status: 200,
				InputTokens: ledger.Known(1), OutputTokens: ledger.Known(1), TotalTokens: ledger.Known(2)}
			if _, err := dst.(ledger.Importer).ImportRows(ctx, []ledger.Row{theirs}); err != nil {
				t.Fatal(err)
			}
			if err := dst.Close(); err != nil {
				t.Fatal(err)
			}
			before := ledgerViews(t, target, f.Clock)

			if code := runCmd(t, f, out, errOut, "ledger", "copy", "--to", target); code != ExitUsage {
				t.Fatalf("copy into a ledger with usage before the cut: exit %d, want 2\n%s%s", code, out, errOut)
			}
			for _, want := range []string{"already holds usage before 2026-11-23T00:00:00Z", "nothing was copied", "--drop-pruned"} {
				if !strings.Contains(errOut.String(), want) {
					t.Errorf("refusal %q does not say %q", errOut, want)
				}
			}
			compareViews(t, "target after a refused copy", ledgerViews(t, target, f.Clock), before)

			if code := runCmd(t, f, out, errOut, "ledger", "copy", "--to", target, "--drop-pruned"); code != 0 {
				t.Fatalf("copy --drop-pruned: exit %d\n%s%s", code, out, errOut)
			}
			if !strings.HasPrefix(out.String(), "copied to ") || !strings.Contains(errOut.String(), "warning: not copied (--drop-pruned): the usage of ") {
				t.Errorf("copy --drop-pruned printed %q, stderr %q", out, errOut)
			}
		})
	}
}

// copyTargets are the ledgers a copy test writes to: a new SQLite file
// and a new PostgreSQL schema.
var copyTargets = []struct {
	name   string
	target func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "team.db") }},
	{"postgres", func(t *testing.T) string { u, _ := pgtest.Schema(t); return u }},
}

// The token is stored before its file is written (so that homes running
// init at once never take one label); a file that cannot be written then
// gives the free label back, not a token whose secret nothing holds.
func TestInitThatCannotWriteTheTokenGivesItsLabelBack(t *testing.T) {
	ctx := context.Background()
	f, _, _ := fakeFactory(t, nil, nil)
	dir, err := f.EnsureHome()
	if err != nil {
		t.Fatal(err)
	}
	// bridge.token is a folder: the file cannot be written, even with --force.
	if err := os.Mkdir(filepath.Join(dir, "bridge.token"), 0o700); err != nil {
		t.Fatal(err)
	}
	opts := &initOptions{IO: f.IO, EnsureHome: f.EnsureHome, ConfigPath: f.ConfigPath, Ledger: f.initLedger,
		Hostname: func() (string, error) { return "box", nil }, Force: true}
	if err := initRun(ctx, opts); err == nil {
		t.Fatal("init wrote a token into a folder")
	}
	store, err := f.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if toks, err := store.ClientTokens(ctx); err != nil || len(toks) != 0 {
		t.Errorf("tokens after the failed init: %+v, %v; want none", toks, err)
	}
}

// copiedTo opens the ledger a copy wrote at target, closed when the test
// ends.
func copiedTo(t *testing.T, f *Factory, target string) ledger.Ledger {
	t.Helper()
	l, err := f.openCopyTarget(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// A budget, client token or price of the same name with any other value in
// the target stops the copy (exit 2, listing it) before anything is
// written: a budget that differs only by its window, a token stored there
// under another label, a price that differs only by its cached rate.
func TestLedgerCopyConflictsOnAnyOtherValue(t *testing.T) {
	ctx := context.Background()
	h := tokenfile.Generate().Hash()
	tests := []struct {
		name string
		put  func(src, dst ledger.Ledger) error
		want string
	}{
		{"budget window", func(src, dst ledger.Ledger) error {
			b := budgets.Budget{Name: "daily", Kind: budgets.KindRequests, Limit: 7, Window: budgets.Window{Calendar: "day"}}
			if err := src.PutBudget(ctx, b.Record(), false); err != nil {
				return err
			}
			b.Window = budgets.Window{Rolling: 24 * time.Hour}
			return dst.PutBudget(ctx, b.Record(), false)
		}, "budget daily"},
		{"token label", func(src, dst ledger.Ledger) error {
			if err := src.AddClientToken(ctx, "ci", h, false); err != nil {
				return err
			}
			return dst.AddClientToken(ctx, "laptop", h, false)
		}, "token ci: the same token is stored there as laptop"},
		{"cached price", func(src, dst ledger.Ledger) error {
			if _, err := src.PutPrices(ctx, []ledger.Price{{Model: "gpt", InputMicros: 3, OutputMicros: 3, CachedInputMicros: ledger.Known(1), Source: ledger.SourceSet}}, false); err != nil {
				return err
			}
			_, err := dst.PutPrices(ctx, []ledger.Price{{Model: "gpt", InputMicros: 3, OutputMicros: 3, CachedInputMicros: ledger.Known(2), Source: ledger.SourceSet}}, false)
			return err
		}, "price gpt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, out, _ := fakeFactory(t, nil, nil)
			src, err := f.LedgerOrCreate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(t.TempDir(), "team.db")
			dst, err := f.openCopyTarget(ctx, target)
			if err != nil {
				t.Fatal(err)
			}
			err = tt.put(src, dst)
			dst.Close()
			if err != nil {
				t.Fatal(err)
			}
			err = copyRun(ctx, &copyOptions{IO: f.IO, From: f.Ledger, To: f.openCopyTarget, Source: f.DBPath, URL: target})
			wantUsageError(t, tt.name, err, "1 item(s)")
			if !strings.Contains(fmt.Sprint(err), tt.want) || out.Len() != 0 {
				t.Errorf("copy: %v, printed %q; want the conflict %q and nothing copied", err, out, tt.want)
			}
		})
	}
}

// A reservation past its expiry (left by a rotor that died) is no request
// in flight: the copy carries it, unsettled, where ledger settle can still
// resolve it, and warns of nothing.
func TestLedgerCopyCarriesAReservationLeftByADeadRotor(t *testing.T) {
	ctx := context.Background()
	f, out, errOut := fakeFactory(t, nil, nil)
	src := fillLedger(t, f, 5)
	if err := src.Reserve(ctx, ledger.Reservation{RequestID: "left", Operation: "chat", Pool: "api", Model: "m", Client: "ci", Expires: f.Clock.Now().Add(time.Minute)}, nil); err != nil {
		t.Fatal(err)
	}
	f.Clock.(*clock.Fake).Advance(2 * time.Minute)
	target := filepath.Join(t.TempDir(), "team.db")
	if err := copyRun(ctx, &copyOptions{IO: f.IO, From: f.Ledger, To: f.openCopyTarget, Source: f.DBPath, URL: target}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), ": 6 rows") || strings.Contains(errOut.String(), "in flight") {
		t.Errorf("copy beside an expired reservation printed %q, %q; want 6 rows copied and no warning", out, errOut)
	}
	dst := copiedTo(t, f, target)
	if r, ok, err := dst.(ledger.RowLookup).RowByID(ctx, "left"); err != nil || !ok || r.Settled {
		t.Errorf("the expired reservation on the target: %+v %v %v; want it there, unsettled", r, ok, err)
	}
}
