package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/gateway"
	"github.com/rotorhq/rotor/internal/clock"
)

func testFactory(t *testing.T) (*Factory, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	f := NewFactory(&IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut})
	f.Clock = clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	f.home = t.TempDir()
	t.Cleanup(f.Close)
	return f, out, errOut
}

func TestBudgetAddFlagsToOptions(t *testing.T) {
	tests := []struct {
		args []string
		want budgets.Budget
	}{
		{[]string{"--tokens", "5000", "--window", "day"}, budgets.Budget{Name: "tokens-day", Kind: budgets.KindTokens, Limit: 5000, Window: budgets.Window{Calendar: "day"}}},
		{[]string{"--requests", "10", "--window", "7d", "--name", "weekly"}, budgets.Budget{Name: "weekly", Kind: budgets.KindRequests, Limit: 10, Window: budgets.Window{Rolling: 7 * 24 * time.Hour}}},
		{[]string{"--cost", "0.25", "--window", "30m"}, budgets.Budget{Name: "cost-30m", Kind: budgets.KindCost, Limit: 250000, Window: budgets.Window{Rolling: 30 * time.Minute}}},
	}
	for _, tt := range tests {
		f, _, _ := testFactory(t)
		var got *budgetAddOptions
		cmd := newCmdBudgetAdd(f, func(o *budgetAddOptions) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if got.Budget != tt.want {
			t.Errorf("%v: options %+v, want %+v", tt.args, got.Budget, tt.want)
		}
	}
}

// budget add refuses, exit 2 naming the flag and before anything is
// written, a budget that could not be what the user meant: a limit of 0
// requests or tokens (it would refuse every request), two kinds at once
// (which one would the budget count?), and a --name that is not a label.
func TestBudgetAddRefusesBadFlags(t *testing.T) {
	f, _, _ := testFactory(t)
	for _, c := range []struct {
		want string
		args []string
	}{
		{"--requests must be more than 0", []string{"--requests", "0", "--window", "day"}},
		{"--requests must be more than 0", []string{"--requests", "-3", "--window", "day"}},
		{"--tokens must be more than 0", []string{"--tokens", "0", "--window", "1h"}},
		{"exactly one", []string{"--requests", "3", "--tokens", "5000", "--window", "day"}},
		{"exactly one", []string{"--tokens", "5000", "--cost", "1", "--window", "day"}},
		{"--name", []string{"--requests", "3", "--window", "day", "--name", "my budget"}},
		{"--name", []string{"--requests", "3", "--window", "day", "--name", "-dash-first"}},
		{"--window is required", []string{"--requests", "3"}},
		{"--window: ", []string{"--requests", "3", "--window", "fortnight"}},
		{"--window: ", []string{"--requests", "3", "--window", "367d"}},
		{"--cost: ", []string{"--cost", "1.0000001", "--window", "day"}},
		{"--cost: ", []string{"--cost", "-1", "--window", "day"}},
	} {
		refused[budgetAddOptions](t, f, newCmdBudgetAdd, c.want, c.args...)
	}
}

func TestBudgetAddRunThenList(t *testing.T) {
	f, out, _ := testFactory(t)
	cmd := newCmdBudgetAdd(f, nil)
	cmd.SetArgs([]string{"--requests", "3", "--window", "1h"})
	cmd.SetContext(context.Background())
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.Bytes(), []byte("requests-1h")) {
		t.Errorf("add printed %q", out)
	}
	out.Reset()
	list := newCmdBudgetList(f, nil)
	list.SetArgs([]string{"--format", "csv"})
	if err := list.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := "name,kind,window,limit,used,remaining,unknown_rows,state,frees_at,unit\nrequests-1h,requests,1h,3,0,3,0,ok,,requests\n"
	if out.String() != want {
		t.Errorf("list csv = %q, want %q", out, want)
	}
}

func TestReportFlagsToQuery(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		args     []string
		from, to time.Time
		by       []string
	}{
		{nil, now.Add(-24 * time.Hour), now.Add(time.Millisecond), []string{"operation"}},
		{[]string{"--since", "7d", "--by", "model,day,model"}, now.Add(-7 * 24 * time.Hour), now.Add(time.Millisecond), []string{"model", "day"}},
		{[]string{"--from", "yesterday", "--to", "today", "--by", "client"}, time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), []string{"client"}},
		{[]string{"--from", "2026-11-01T00:00:00Z"}, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), now, []string{"operation"}},
	}
	for _, tt := range tests {
		f, _, _ := testFactory(t)
		var got *reportOptions
		cmd := newCmdLedgerReport(f, func(o *reportOptions) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		q := got.Query
		if !q.From.Equal(tt.from) || !q.To.Equal(tt.to) || len(q.By) != len(tt.by) {
			t.Errorf("%v: query %+v, want [%v, %v) by %v", tt.args, q, tt.from, tt.to, tt.by)
		}
		for i := range tt.by {
			if q.By[i] != tt.by[i] {
				t.Errorf("%v: by %v, want %v", tt.args, q.By, tt.by)
			}
		}
	}
}

// The range flags of ledger report (and ledger rows, which share them)
// refuse, exit 2 naming the flag, a range that would silently answer
// nothing or something other than asked: an empty range (--from equal to
// --to) or a reversed one, --to without --from (it would be ignored for
// the default --since 24h), a --since that is not a positive duration,
// and --since together with --from.
func TestReportRangeFlagsRefused(t *testing.T) {
	f, _, _ := testFactory(t)
	for _, c := range []struct {
		want string
		args []string
	}{
		{"--from must be before --to", []string{"--from", "2026-11-01", "--to", "2026-11-01"}},
		{"--from must be before --to", []string{"--from", "2026-11-01T10:00:00Z", "--to", "2026-11-01T10:00:00Z"}},
		{"--from must be before --to", []string{"--from", "today", "--to", "yesterday"}},
		{"--to needs --from", []string{"--to", "today"}},
		{"--since \"0s\": must be more than 0", []string{"--since", "0s"}},
		{"--since \"0\": must be more than 0", []string{"--since", "0"}},
		{"--since", []string{"--since", "soon"}},
		{"not both", []string{"--since", "1h", "--from", "today"}},
	} {
		refused[reportOptions](t, f, newCmdLedgerReport, c.want, c.args...)
		refused[rowsOptions](t, f, newCmdLedgerRows, c.want, c.args...)
	}
}

func TestExitCodes(t *testing.T) {
	f, _, errOut := testFactory(t)
	if code := run(context.Background(), f, []string{"budget", "add", "--window", "day"}); code != ExitUsage {
		t.Errorf("usage error exit %d, want 2", code)
	}
	if !bytes.Contains(errOut.Bytes(), []byte("exactly one")) {
		t.Errorf("stderr %q", errOut)
	}
	if code := run(context.Background(), f, []string{"version"}); code != ExitOK {
		t.Errorf("version exit %d", code)
	}
}

// fakeFactory is a Factory over fixed parts, without flags or the process
// environment: a home folder in t.TempDir (not created yet), the default configuration (or
// cfg), env as the environment, a fake clock and buffers for the streams.
func fakeFactory(t *testing.T, cfg *config.Config, env map[string]string) (*Factory, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	if cfg == nil {
		d := config.Default()
		cfg = &d
	}
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	f := newFixedFactory(&IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}, filepath.Join(t.TempDir(), "home"), cfg, env,
		clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)), slog.New(slog.DiscardHandler))
	t.Cleanup(f.Close)
	return f, out, errOut
}

// flagsToOptions runs newCmd with args and a runF that captures the
// options, so nothing runs.
func flagsToOptions[T any](t *testing.T, f *Factory, newCmd func(*Factory, func(*T) error) *cobra.Command, args ...string) *T {
	t.Helper()
	var got *T
	cmd := newCmd(f, func(o *T) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("%s %q: %v", cmd.Name(), args, err)
	}
	if got == nil {
		t.Fatalf("%s %q: runF was not called", cmd.Name(), args)
	}
	return got
}

// wantUsageError fails unless err is a usage error (exit 2) containing
// want.
func wantUsageError(t *testing.T, what string, err error, want string) {
	t.Helper()
	if exitCode(err) != ExitUsage || !strings.Contains(fmt.Sprint(err), want) {
		t.Errorf("%s: error %v (exit %d), want a usage error mentioning %q", what, err, exitCode(err), want)
	}
}

// refused runs newCmd with args and fails unless it exits 2 mentioning
// want before calling runF.
func refused[T any](t *testing.T, f *Factory, newCmd func(*Factory, func(*T) error) *cobra.Command, want string, args ...string) {
	t.Helper()
	cmd := newCmd(f, func(*T) error { t.Errorf("%s %q: runF called", want, args); return nil })
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	wantUsageError(t, fmt.Sprintf("%q", args), cmd.Execute(), want)
}

// runFTests are the flags -> options tests of every verb, by command path;
// TestEveryVerbHasRunFTest checks that none is missing. Budget add and
// ledger report have their own tables above.
var runFTests = map[string]func(t *testing.T){
	"budget add":    TestBudgetAddFlagsToOptions,
	"ledger report": TestReportFlagsToQuery,
	"version": func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdVersion)
		if got.Info != readBuildInfo() || got.IO != f.IO {
			t.Errorf("options %+v, want the build info and the factory's streams", got)
		}
	},
	"init": func(t *testing.T) {
		f, _, _ := testFactory(t)
		if got := flagsToOptions(t, f, newCmdInit); got.Force {
			t.Error("init: Force set without --force")
		}
		got := flagsToOptions(t, f, newCmdInit, "--force")
		if !got.Force {
			t.Error("init --force: Force not set")
		}
		// init writes: its ledger func creates the ledger.
		if _, err := got.Ledger(context.Background()); err != nil {
			t.Errorf("init's Ledger does not create the ledger: %v", err)
		}
	},
	"config check": func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdConfigCheck, "--format", "json")
		if got.Format != FormatJSON {
			t.Errorf("Format %q, want json", got.Format)
		}
		home, _ := f.Home()
		if h, err := got.Home(); err != nil || h != home {
			t.Errorf("Home() = %q, %v; want %q", h, err, home)
		}
	},
	"budget list": func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdBudgetList, "--format", "csv")
		if got.Format != FormatCSV {
			t.Errorf("Format %q, want csv", got.Format)
		}
		// list only reads: its ledger func never creates one.
		_, err := got.Ledger(context.Background())
		wantUsageError(t, "budget list's Ledger on an empty home", err, "no ledger at")
	},
	"budget remove": func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdBudgetRemove, "daily")
		if got.Name != "daily" {
			t.Errorf("Name %q, want daily", got.Name)
		}
		_, err := got.Ledger(context.Background())
		wantUsageError(t, "budget remove's Ledger on an empty home", err, "no ledger at")
	},
	"bridge token create": func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdTokenCreate, "--label", "ci.bot-1")
		if got.Label != "ci.bot-1" {
			t.Errorf("Label %q, want ci.bot-1", got.Label)
		}
		if _, err := got.Ledger(context.Background()); err != nil {
			t.Errorf("token create's Ledger does not create the ledger: %v", err)
		}
		refused(t, f, newCmdTokenCreate, "--label", "--label", "a b")
		// The label of calls made straight to a standalone runtime: a
		// token of that label would make its rows indistinguishable.
		refused(t, f, newCmdTokenCreate, "--label", "--label", gateway.DirectClient)
	},
	"bridge token list": func(t *testing.T) {
		f, _, _ := testFactory(t)
		if got := flagsToOptions(t, f, newCmdTokenList); got.Format != FormatTable {
			t.Errorf("Format %q, want table", got.Format)
		}
		refused(t, f, newCmdTokenList, "--format", "--format", "xml")
	},
	"bridge token revoke": func(t *testing.T) {
		f, _, _ := testFactory(t)
		if got := flagsToOptions(t, f, newCmdTokenRevoke, "ci"); got.Name != "ci" {
			t.Errorf("Name %q, want ci", got.Name)
		}
	},
	"status": func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdStatus, "--url", "http://127.0.0.1:9", "--format", "csv")
		if got.URL != "http://127.0.0.1:9" || got.Format != FormatCSV || got.HTTPClient() == nil {
			t.Errorf("options %+v, want the url, csv and a client", got)
		}
	},
	"bridge start": func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdBridgeStart, "--listen", "127.0.0.1:0", "--runtime-url", "http://127.0.0.1:9", "--allow-non-loopback")
		if !got.AllowNonLoopback {
			t.Error("AllowNonLoopback not set")
		}
		// --listen and --runtime-url set config keys.
		cfg, err := got.f.Config()
		if err != nil || cfg.Bridge.Listen != "127.0.0.1:0" || cfg.Bridge.RuntimeURL != "http://127.0.0.1:9" {
			t.Errorf("config %+v, %v; want the flags' listen and runtime_url", cfg.Bridge, err)
		}
	},
	"runtime start": func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdRuntimeStart, "--listen", "127.0.0.1:0")
		if got.AllowNonLoopback {
			t.Error("AllowNonLoopback set without the flag")
		}
		cfg, err := got.f.Config()
		if err != nil || cfg.Runtime.Listen != "127.0.0.1:0" {
			t.Errorf("runtime.listen %q, %v; want the flag's", cfg.Runtime.Listen, err)
		}
	},
	"demo": func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdDemo, "--requests", "5", "--keep", "kept")
		if got.Requests != 5 || got.Keep != "kept" || got.HomeIgnored {
			t.Errorf("options %+v, want 5 requests, kept, home not ignored", got)
		}
		// Under a root with --home, the demo notes that it ignores it.
		root := &cobra.Command{Use: "rotor"}
		root.PersistentFlags().String("home", "", "")
		var under *demoOptions
		root.AddCommand(newCmdDemo(f, func(o *demoOptions) error { under = o; return nil }))
		root.SetArgs([]string{"--home", "mine", "demo"})
		if err := root.Execute(); err != nil || under == nil || !under.HomeIgnored || under.Requests != 12 {
			t.Errorf("rotor --home mine demo: %v, options %+v; want HomeIgnored and 12 requests", err, under)
		}
		// --config too: the demo writes its own rotor.yaml.
		root = &cobra.Command{Use: "rotor"}
		root.PersistentFlags().String("config", "", "")
		under = nil
		root.AddCommand(newCmdDemo(f, func(o *demoOptions) error { under = o; return nil }))
		root.SetArgs([]string{"--config", "mine.yaml", "demo"})
		if err := root.Execute(); err != nil || under == nil || !under.HomeIgnored {
			t.Errorf("rotor --config mine.yaml demo: %v, options %+v; want HomeIgnored", err, under)
		}
		refused(t, f, newCmdDemo, "--requests", "--requests", "0")
	},
}

func TestVerbFlagsToOptions(t *testing.T) {
	for verb, test := range runFTests {
		t.Run(strings.ReplaceAll(verb, " ", "_"), test)
	}
}

// Every runnable command has a flags -> options test: a verb added without
// one fails here.
func TestEveryVerbHasRunFTest(t *testing.T) {
	cmds, group := userCommands(t)
	for i, c := range cmds {
		verb := strings.Join(c, " ")
		if group[i] || verb == "completion" || (len(c) > 1 && c[0] == "completion") {
			continue
		}
		if _, ok := runFTests[verb]; !ok {
			t.Errorf("%q has no flags -> options test in runFTests", verb)
		}
	}
}

// userCommands lists every command a user can run, by its words after
// "rotor", and whether it is a group (a noun with verbs under it). e2e has
// its own, read from the built binary's --help.
func userCommands(t *testing.T) (cmds [][]string, group []bool) {
	t.Helper()
	f, _, _ := testFactory(t)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		if c.HasParent() {
			cmds = append(cmds, strings.Fields(strings.TrimPrefix(c.CommandPath(), "rotor ")))
			group = append(group, c.HasSubCommands())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewCmdRoot(f))
	return cmds, group
}

// Issue 14, item 17: a malformed learned-cooldown policy is named where it
// was read (the file's key, or the variable that was set), config check
// counts it, and learning is off for the runtime.
func TestMalformedPolicyNamedWhereItWasRead(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string // "" for a policy that parses
	}{
		{"file", nil, "learned_cooldown.policy_json"},
		{"spec variable", map[string]string{"LEARNED_COOLDOWN_POLICY_JSON": `{"buckets":"x"}`}, "LEARNED_COOLDOWN_POLICY_JSON"},
		{"rotor variable", map[string]string{"ROTOR_LEARNED_COOLDOWN_POLICY_JSON": `{"nope":1}`}, "ROTOR_LEARNED_COOLDOWN_POLICY_JSON"},
		{"good variable over the file", map[string]string{"LEARNED_COOLDOWN_POLICY_JSON": `{"buckets":[]}`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _, _ := testFactory(t)
			f.LookupEnv = func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			yaml := "learned_cooldown: {mode: shadow, policy_json: 'not json'}\n"
			if err := os.WriteFile(filepath.Join(f.home, "rotor.yaml"), []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := f.Config()
			if err != nil {
				t.Fatal(err)
			}
			got := f.Malformed()
			if tt.want == "" {
				if len(got) != 0 || cfg.LearnedCooldown.Mode != "shadow" {
					t.Errorf("malformed %v, mode %s; want none, shadow", got, cfg.LearnedCooldown.Mode)
				}
				return
			}
			if len(got) != 1 || got[0] != tt.want || cfg.LearnedCooldown.Mode != "off" {
				t.Errorf("malformed %v, mode %s; want [%s], off", got, cfg.LearnedCooldown.Mode, tt.want)
			}
		})
	}
}
