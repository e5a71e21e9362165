package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/pricefile"
)

// A count flag is read in base 10 only: pflag's int flags read "0100" as
// 64 (octal), "0x10" as 16 and "1_0" as 10, so a zero-padded or pasted
// count became another budget, or another settled usage, silently. Every
// such value is refused, exit 2 naming the flag, and nothing is written;
// a count with leading zeros reads as the decimal it looks like, as
// --cost does.
func TestCountFlagsAreDecimal(t *testing.T) {
	f, out, errOut := testFactory(t)
	home := t.TempDir() // run binds --home: name it, or the real home is used
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"--tokens", []string{"budget", "add", "--tokens", "0x10", "--window", "day", "--name", "hex"}},
		{"--requests", []string{"budget", "add", "--requests", "0b11", "--window", "day", "--name", "bin"}},
		{"--tokens", []string{"budget", "add", "--tokens", "1_000", "--window", "day", "--name", "under"}},
		{"--tokens", []string{"budget", "add", "--tokens", "0o17", "--window", "day", "--name", "octo"}},
		{"--input", []string{"ledger", "settle", "r1", "--input", "0x10", "--output", "1"}},
		{"--output", []string{"ledger", "settle", "r1", "--input", "1", "--output", "0b1"}},
		{"--cached", []string{"ledger", "settle", "r1", "--input", "1", "--output", "1", "--cached", "0x1"}},
		// A later bad flag keeps these from running should the count be
		// taken: only the count's own error names the count's flag.
		{"--keys", []string{"fake-provider", "--listen", "bad", "--keys", "0x2"}},
		{"--requests", []string{"demo", "--keep", t.TempDir(), "--requests", "0x2"}},
	} {
		args := append([]string{"--home", home}, c.args...)
		if code := runCmd(t, f, out, errOut, args...); code != ExitUsage || !strings.Contains(errOut.String(), c.flag) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d naming %s", c.args, code, errOut, ExitUsage, c.flag)
		}
	}
	if code := runCmd(t, f, out, errOut, "--home", home, "budget", "add", "--tokens", "0100", "--window", "day", "--name", "padded"); code != 0 {
		t.Fatalf("--tokens 0100: exit %d: %s", code, errOut)
	}
	if code := runCmd(t, f, out, errOut, "--home", home, "budget", "list", "--format", "csv"); code != 0 {
		t.Fatalf("budget list: exit %d: %s", code, errOut)
	}
	want := "name,kind,window,limit,used,remaining,unknown_rows,state,frees_at,unit\npadded,tokens,day,100,0,100,0,ok,,tokens\n"
	if got := out.String(); got != want {
		t.Errorf("budget list = %q, want only the padded budget, of 100 tokens: %q", got, want)
	}
}

// pricing set (and import) refuse a MODEL holding a character that prints
// as nothing or as something else: a zero-width space, a byte-order mark,
// a bidi override, or bytes that are not UTF-8 (json prints them as
// U+FFFD, so the name a script reads back is not the stored one). Such a
// price never matches a model sent upstream, yet pricing list shows it as
// the model it looks like, beside the real one.
func TestPricingSetRefusesInvisibleModelCharacters(t *testing.T) {
	f, _, _ := testFactory(t)
	for _, model := range []string{"gpt-4o-mini\u200b", "\ufeffgpt-4o-mini", "gpt\u202e-4o", "gpt-4o\xff"} {
		refused[pricingSetOptions](t, f, newCmdPricingSet, "MODEL", model, "--input", "1", "--output", "1")
	}
	prices, skipped, err := pricefile.ParseLiteLLM([]byte(`{"gpt-4o-mini\u200b": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06}, "gpt-4o-mini": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06}}`), "")
	if err != nil || skipped != 1 || len(prices) != 1 || prices[0].Model != "gpt-4o-mini" {
		t.Errorf("import: %+v, skipped %d, %v; want gpt-4o-mini only, one skipped", prices, skipped, err)
	}
	// A model of letters of any script is still a model.
	cmd := newCmdPricingSet(f, func(*pricingSetOptions) error { return nil })
	cmd.SetArgs([]string{"modèle-ü", "--input", "1", "--output", "1"})
	if err := cmd.Execute(); err != nil {
		t.Errorf("modèle-ü: %v", err)
	}
}

// rotor status prints a cost budget's used and limit in USD as budget list
// prints them, "$1.5" (README: "a cost budget's used and limit in USD, as
// budget list prints them"), not a bare 1.5 beside request and token
// counts.
func TestStatusTablePrintsCostAsBudgetList(t *testing.T) {
	spend, daily := statusBudgetRows(t, `{"name":"spend","kind":"cost","window":"day","limit":1500000,"used":15,"remaining":1499985,"unknown_rows":0,"state":"ok"}`)
	st := budgets.Status{Budget: budgets.Budget{Kind: budgets.KindCost, Limit: 1_500_000}, Used: 15}
	for _, want := range []string{" " + st.FormatUsed() + " ", " " + st.FormatLimit() + " "} {
		if !strings.Contains(spend, want) {
			t.Errorf("cost budget row %q: want %q, as budget list prints it", spend, want)
		}
	}
	if !strings.Contains(daily, " 3 ") || !strings.Contains(daily, " 10 ") || strings.Contains(daily, "$") {
		t.Errorf("requests budget row %q: want plain counts", daily)
	}
}

// The range is half-open, [from, to), in real time, though rows are
// stored to the millisecond: a --from or --to with a finer fraction
// (RFC 3339 allows nanoseconds, as a script's date +%FT%T.%NZ writes them)
// must not take in a row before --from, nor leave out one before --to.
// careLedger's first row is at 09:00:13.007.
func TestRangeBoundsFinerThanAMillisecond(t *testing.T) {
	f, out, errOut := testFactory(t)
	home := f.home
	careLedger(t, f)
	rows := func(from, to string) string {
		t.Helper()
		if code := runCmd(t, f, out, errOut, "--home", home, "ledger", "rows", "--from", from, "--to", to, "--jq", ".[].request_id"); code != 0 {
			t.Fatalf("ledger rows --from %s --to %s: exit %d: %s", from, to, code, errOut)
		}
		return strings.TrimSpace(out.String())
	}
	if got := rows("2026-11-20T09:00:13.0075Z", "2026-11-20T10:00:00Z"); got != "" {
		t.Errorf("--from 09:00:13.0075: rows %q, want none (req-00 is at 09:00:13.007, before --from)", got)
	}
	if got := rows("2026-11-20T09:00:00Z", "2026-11-20T09:00:13.0071Z"); got != "req-00" {
		t.Errorf("--to 09:00:13.0071: rows %q, want req-00 (at 09:00:13.007, before --to)", got)
	}
}

// A ledger, a backup or a copy's target in a folder that does not exist
// is the user's to fix (exit 2), and the message names the folder rather
// than a temporary file's name; nothing is made.
func TestLedgerFileInAMissingFolderIsAUsageError(t *testing.T) {
	home := t.TempDir()
	missing := filepath.Join(t.TempDir(), "no-such-folder")
	f, out, errOut := testFactory(t)
	if code := runCmd(t, f, out, errOut, "--home", home, "budget", "add", "--requests", "5", "--window", "day"); code != 0 {
		t.Fatalf("a ledger to back up and copy: exit %d: %s", code, errOut)
	}
	f.Close()
	for _, args := range [][]string{
		{"--db", filepath.Join(missing, "rotor.db"), "budget", "add", "--tokens", "5", "--window", "day"},
		{"ledger", "backup", filepath.Join(missing, "backup.db")},
		{"ledger", "copy", "--to", filepath.Join(missing, "copy.db")},
	} {
		f, out, errOut := testFactory(t) // each opens its ledger anew
		args = append([]string{"--home", home}, args...)
		if code := runCmd(t, f, out, errOut, args...); code != ExitUsage || !strings.Contains(errOut.String(), "folder does not exist: "+missing) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d naming %s", args, code, errOut, ExitUsage, missing)
		}
		if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%q made %s", args, missing)
		}
	}
}
