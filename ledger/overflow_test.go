package ledger

import (
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil"
)

// huge is the usage a lying provider answered in issue 14, item 1.
const huge = int64(999_999_999_999_999_999)

// readingAdmitter reads the last day's window as a tokens budget does, so
// admission fails when the window cannot be summed, or wraps negative.
var readingAdmitter = AdmitFunc(func(r WindowReader, _ Reservation) error {
	now := r.Now()
	w := Window{From: now.Add(-24 * time.Hour), To: now.Add(time.Millisecond)}
	tot, err := r.Totals(w)
	if err != nil {
		return err
	}
	if _, _, err := r.Reach(w, MeasureTokens, math.MaxInt64); err != nil {
		return err
	}
	if tot.Tokens < 0 || tot.CostMicros < 0 || tot.Requests < 0 {
		return fmt.Errorf("window wrapped: %+v", tot)
	}
	return nil
})

// stillServes checks that admission, budgets, tokens and reports all work.
func stillServes(t *testing.T, s *Store, clk *clock.Fake, tag string) []ReportRow {
	t.Helper()
	for i, step := range []time.Duration{11 * time.Second, 11 * time.Second, 2 * time.Hour} {
		clk.Advance(step) // past foldAge, so every batch folds; then past the hour rollup
		id := fmt.Sprintf("%s-after-%d", tag, i)
		if err := s.Reserve(ctx, Reservation{RequestID: id, Operation: "decisions", Model: "m", Expires: clk.Now().Add(time.Hour)}, readingAdmitter); err != nil {
			t.Fatalf("%s: admission after the overflow: %v", tag, err)
		}
		settle(t, s, id, 10, 200)
	}
	if err := s.PutBudget(ctx, BudgetRecord{Name: tag + "-b", Kind: "tokens", Limit: 100, Window: "24h"}, false); err != nil {
		t.Fatalf("%s: budget add: %v", tag, err)
	}
	if err := s.AddClientToken(ctx, tag+"-tok", [32]byte{1, byte(len(tag))}, false); err != nil {
		t.Fatalf("%s: token create: %v", tag, err)
	}
	if err := s.View(ctx, func(r WindowReader) error {
		now := r.Now()
		for _, w := range []Window{{now.Add(-time.Hour), now.Add(time.Millisecond)}, {now.Add(-48 * time.Hour), now.Add(time.Millisecond)}} {
			if _, err := r.Totals(w); err != nil {
				return err
			}
			if _, _, err := r.Reach(w, MeasureTokens, math.MaxInt64); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("%s: budget list view: %v", tag, err)
	}
	var rows []ReportRow
	for _, by := range [][]string{{KeyOperation}, {KeyStatus, KeyDay}} {
		// Whole hours (the rollup) and raw edges both.
		got, err := s.Report(ctx, ReportQuery{From: t0.Add(-3 * time.Hour), To: clk.Now().Add(2 * time.Hour), By: by})
		if err != nil {
			t.Fatalf("%s: report: %v", tag, err)
		}
		if by[0] == KeyOperation {
			rows = got
		}
	}
	return rows
}

func TestUsageOverflowCannotBrickLedger(t *testing.T) {
	t.Run("settled by this rotor", func(t *testing.T) {
		clk := clock.NewFake(t0)
		s, _ := openTest(t, clk)
		for i := range 5 {
			id := fmt.Sprint("liar-", i)
			reserve(t, s, id)
			if err := s.Settle(ctx, Settlement{RequestID: id, Model: "m", Credential: "c", Attempts: 1, Status: 200,
				InputTokens: Known(huge), OutputTokens: Known(huge), TotalTokens: Known(huge), CostMicros: Known(-1)}); err != nil {
				t.Fatalf("settle %s: %v", id, err)
			}
		}
		// A value at the bound is still read.
		reserve(t, s, "edge")
		if err := s.Settle(ctx, Settlement{RequestID: "edge", Model: "m", Attempts: 1, Status: 200,
			InputTokens: Known(MaxUsage), OutputTokens: Known(0), TotalTokens: Known(MaxUsage)}); err != nil {
			t.Fatal(err)
		}
		rows, err := s.Rows(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.RequestID == "edge" {
				if r.TotalTokens != Known(MaxUsage) || r.OutputTokens != Known(0) {
					t.Errorf("edge row: %+v, want its in-range usage kept", r)
				}
				continue
			}
			if r.InputTokens.Known || r.OutputTokens.Known || r.TotalTokens.Known || r.CostMicros.Known {
				t.Errorf("row %s stored out-of-range usage %+v; want NULL (unknown)", r.RequestID, r)
			}
		}
		got := stillServes(t, s, clk, "fresh")
		if len(got) != 1 || got[0].Requests != 9 || got[0].TokensUnknown != 5 || got[0].TotalTokens != MaxUsage+30 {
			t.Errorf("report = %+v, want 9 requests, 5 of unknown tokens, %d known tokens", got, MaxUsage+30)
		}
	})

	t.Run("written by an older rotor", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "rotor.db")
		clk := clock.NewFake(t0)
		s := openAt(t, path, clk)
		reserve(t, s, "first") // folds the empty ledger up to now
		s.Close()
		// An older rotor stored the provider's numbers as they came, ahead
		// of the fold frontier; one row even holds text. And a minute rollup
		// that already sits next to the int64 limit.
		db := openRaw(t, path)
		for i := range 5 {
			if _, err := db.Exec(`INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, model, status, attempts, input_tokens, output_tokens, total_tokens)
				VALUES (?, ?, 1, ?, 'decisions', 'm', 200, 1, ?, ?, ?)`, fmt.Sprint("old-", i), t0.UnixMilli()+int64(i)+1, t0.Add(time.Hour).UnixMilli(), huge, huge, huge); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Exec(`INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, model, status, attempts, total_tokens, cost_micros)
			VALUES ('old-text', ?, 1, ?, 'decisions', 'm', 200, 1, 'lots', ?)`, t0.UnixMilli()+7, t0.Add(time.Hour).UnixMilli(), -5); err != nil {
			t.Fatal(err)
		}
		// -1, just below the readable range, is as unreadable as -5.
		if _, err := db.Exec(`INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, model, status, attempts, total_tokens)
			VALUES ('old-negative', ?, 1, ?, 'decisions', 'm', 200, 1, -1)`, t0.UnixMilli()+8, t0.Add(time.Hour).UnixMilli()); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT OR REPLACE INTO usage_minute (bucket, requests, tokens, tokens_null, cost_micros, cost_null) VALUES (?, 0, ?, 0, 0, 0)`,
			t0.UnixMilli()/minuteMS, int64(math.MaxInt64-3)); err != nil {
			t.Fatal(err)
		}
		db.Close()

		var logs testutil.SyncBuffer
		s2 := openWith(t, path, Options{Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		got := stillServes(t, s2, clk, "legacy")
		if len(got) != 1 || got[0].Requests != 11 || got[0].TokensUnknown != 8 {
			t.Errorf("report = %+v, want 11 requests, 8 of unknown tokens (7 set aside, 1 unsettled)", got)
		}
		n, err := s2.SetAside(ctx)
		if err != nil || n != 7 {
			t.Errorf("SetAside = %d, %v; want the 7 unreadable rows", n, err)
		}
		if c := strings.Count(logs.String(), "set aside"); c != 1 {
			t.Errorf("%d warnings about rows set aside, want 1:\n%s", c, logs.String())
		}
		// The window over the saturated minute reads as huge, never fails
		// and never wraps negative.
		var tot Totals
		if err := s2.View(ctx, func(r WindowReader) error {
			tot, err = r.Totals(Window{From: t0.Add(-time.Hour), To: clk.Now().Add(time.Millisecond)})
			return err
		}); err != nil || tot.Tokens < MaxUsage {
			t.Errorf("window totals = %+v, %v; want saturated, positive tokens", tot, err)
		}
	})
}

// Sums saturate at ±SumCap and never wrap, even when two saturated sums
// (a rollup's and the raw rows') meet: a report or window adds them with
// SatAdd, and a lying provider's usage must not turn a total negative.
// Inputs beyond ±SumCap, which no caller passes today, keep their sign.
func TestSatAddSaturatesInsteadOfWrapping(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{SumCap - 1, 1, SumCap},
		{SumCap, 1, SumCap},
		{SumCap, SumCap, SumCap}, // 2^63 overflows int64
		{-SumCap, -SumCap, -SumCap},
		{-SumCap, -1, -SumCap},
		{SumCap, -SumCap, 0},
		{math.MinInt64, -1, -SumCap}, // wraps to the largest int64
		{math.MaxInt64, 1, SumCap},
		{math.MinInt64, math.MaxInt64, -1},
		{math.MaxInt64, 0, SumCap},
	} {
		if got := SatAdd(c.a, c.b); got != c.want {
			t.Errorf("SatAdd(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// A provider answering absurd usage is warned about once per process, not
// once per request: its every answer would flood the log.
func TestUnreadableUsageWarnedOnce(t *testing.T) {
	var logs testutil.SyncBuffer
	clk := clock.NewFake(t0)
	s := openWith(t, filepath.Join(t.TempDir(), "rotor.db"), Options{Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for i := range 3 {
		id := fmt.Sprint("lying-", i)
		reserve(t, s, id)
		if err := s.Settle(ctx, Settlement{RequestID: id, Model: "m", Status: 200, InputTokens: Known(huge), OutputTokens: Known(1), TotalTokens: Known(huge)}); err != nil {
			t.Fatal(err)
		}
	}
	if c := strings.Count(logs.String(), "usage outside"); c != 1 {
		t.Errorf("%d warnings about unreadable usage after 3 such answers, want 1:\n%s", c, logs.String())
	}
}
