package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// badLedgers are ledger locations rotor once took for SQLite file names
// (creating a file named after a connection string in the working
// directory) or printed with their password: each must be refused, exit
// 2, naming where it was read, its password masked.
var badLedgers = []string{
	"host=db.example user=rotor password=hunter2 dbname=rotor",
	" postgres://rotor:hunter2@db.example/rotor",
	"postgres://rotor:hunter2@db.example/rotor ",
	"postgres:/x",
	"pgsql://rotor:hunter2@db.example/rotor",
	"mysql://rotor:hunter2@db.example/rotor",
	"postgresql://rotor:hunter2@[::1",
	" ",
	// URLs that parse but whose parameters the driver refuses: they were
	// a failure to open (exit 1) after the rest of the command had run.
	"postgres://rotor:hunter2@db.example/rotor?sslmode=bogus",
	"postgresql://rotor:hunter2@db.example/rotor?connect_timeout=soon",
}

// inEmptyDir runs the test in a new empty working directory and fails it
// if anything is left there: a ledger location taken for a relative file
// name lands in the working directory.
func inEmptyDir(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	t.Cleanup(func() {
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Errorf("left in the working directory: %v", left)
		}
	})
}

func TestBadLedgerLocationRefusedWhereverItIsRead(t *testing.T) {
	for _, v := range badLedgers {
		for _, tc := range []struct {
			source string
			env    string // the variable set to v, else the flag is
			file   bool   // ledger.url in rotor.yaml
			args   []string
		}{
			{source: "--db", args: []string{"--db", v, "budget", "add", "--requests", "100", "--window", "day"}},
			{source: "ROTOR_DB", env: "ROTOR_DB", args: []string{"budget", "add", "--requests", "100", "--window", "day"}},
			{source: "ROTOR_DB", env: "ROTOR_DB", args: []string{"init"}},
			{source: "ROTOR_DB", env: "ROTOR_DB", args: []string{"config", "check"}},
			{source: "ROTOR_LEDGER_URL", env: "ROTOR_LEDGER_URL", args: []string{"budget", "add", "--requests", "100", "--window", "day"}},
			{source: "rotor.yaml", file: true, args: []string{"config", "check"}},
			{source: "--to", args: []string{"ledger", "copy", "--to", v}},
			{source: "FILE", args: []string{"ledger", "backup", v}},
		} {
			if v == " " && (tc.source == "--db" || tc.source == "--to") {
				continue // the flag check's own message, tested elsewhere
			}
			t.Run(tc.source+" "+strings.Join(tc.args[:min(2, len(tc.args))], " ")+" "+v, func(t *testing.T) {
				inEmptyDir(t)
				f, _, errOut := testFactory(t)
				// run builds the root, whose --home flag resets f.home.
				home := filepath.Join(f.home, "home")
				t.Setenv("ROTOR_HOME", home)
				if tc.env != "" {
					t.Setenv(tc.env, v)
				}
				if tc.file {
					if err := os.MkdirAll(home, 0o700); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(home, "rotor.yaml"), []byte("ledger:\n  url: '"+v+"'\n"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				code := run(context.Background(), f, tc.args)
				got := errOut.String()
				if code != ExitUsage || !strings.Contains(got, tc.source) || strings.Contains(got, "hunter2") {
					t.Errorf("rotor %q with %s=%q: exit %d, stderr %q; want 2 naming %s, no password", tc.args, tc.source, v, code, got, tc.source)
				}
				if _, err := os.Stat(home); err == nil && !tc.file {
					t.Errorf("rotor %q with %s=%q created the home folder", tc.args, tc.source, v)
				}
			})
		}
	}
}

// A blank ROTOR_HOME or ROTOR_CONFIG was a folder or file named " " in
// the working directory; --home " " already exited 2.
func TestBlankPathVariablesRefused(t *testing.T) {
	for _, name := range []string{"ROTOR_HOME", "ROTOR_CONFIG", "ROTOR_DB"} {
		t.Run(name, func(t *testing.T) {
			inEmptyDir(t)
			f, _, errOut := testFactory(t)
			t.Setenv("ROTOR_HOME", filepath.Join(t.TempDir(), "home"))
			t.Setenv(name, " \t")
			if code := run(context.Background(), f, []string{"budget", "add", "--requests", "1", "--window", "day"}); code != ExitUsage || !strings.Contains(errOut.String(), name) {
				t.Errorf("%s=' ': exit %d, stderr %q; want 2 naming %s", name, code, errOut, name)
			}
		})
	}
}

// A PostgreSQL URL's scheme in upper case is read as the driver needs it.
func TestDBPathLowerCasesThePostgresScheme(t *testing.T) {
	for _, tc := range []struct{ flag, env, want string }{
		{flag: "POSTGRES://rotor:pw@db.example/rotor", want: "postgres://rotor:pw@db.example/rotor"},
		{env: "PostgreSQL://db.example/rotor", want: "postgresql://db.example/rotor"},
		{flag: "rel/Rotor.db", want: "rel/Rotor.db"},
	} {
		f, _, _ := testFactory(t)
		f.dbFlag = tc.flag
		t.Setenv("ROTOR_DB", tc.env)
		if got, err := f.DBPath(); got != tc.want || err != nil {
			t.Errorf("DBPath() with --db %q, ROTOR_DB %q = %q, %v; want %q", tc.flag, tc.env, got, err, tc.want)
		}
	}
}

// The copy and backup targets are checked before anything runs, and the
// copy's target is passed on as the driver needs it.
func TestCopyAndBackupTargetsChecked(t *testing.T) {
	f, _, _ := testFactory(t)
	refused(t, f, newCmdLedgerCopy, "--to: a ledger is a SQLite file or a postgres:// URL", "--to", "mysql://rotor:hunter2@db/rotor")
	refused(t, f, newCmdLedgerCopy, "write it as a postgres:// URL", "--to", "host=db password=hunter2")
	refused(t, f, newCmdLedgerBackup, "FILE:", "postgres://rotor:hunter2@db.example/rotor")
	refused(t, f, newCmdLedgerBackup, "FILE:", "host=db password=hunter2")
	refused(t, f, newCmdLedgerBackup, "white space", "backup.db ")
	if got := flagsToOptions(t, f, newCmdLedgerCopy, "--to", "POSTGRESQL://db/rotor"); got.URL != "postgresql://db/rotor" {
		t.Errorf("copy --to POSTGRESQL://db/rotor: URL %q, want the scheme in lower case", got.URL)
	}
}

// maskErr masks the password of any location, a refused one included.
func TestMaskErrMasksAKeywordValueString(t *testing.T) {
	loc := "host=db user=rotor password=hunter2 dbname=rotor"
	err := maskErr(os.ErrNotExist, loc)
	if err.Error() != os.ErrNotExist.Error() {
		t.Errorf("maskErr changed an error that holds no password: %v", err)
	}
	err = maskErr(&UsageError{Err: os.ErrInvalid}, "")
	if err.Error() != os.ErrInvalid.Error() {
		t.Errorf("maskErr with no location changed the error: %v", err)
	}
	for _, msg := range []string{"open " + loc + ": no", "auth failed for password hunter2"} {
		got := scrubURL(msg, loc)
		if strings.Contains(got, "hunter2") {
			t.Errorf("scrubURL(%q) = %q keeps the password", msg, got)
		}
	}
}
