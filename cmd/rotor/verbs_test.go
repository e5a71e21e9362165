package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
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
