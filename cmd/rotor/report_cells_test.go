package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rotorhq/rotor/ledger"
)

// A report group holding a row of unknown tokens shows the token sums it
// cannot know as null in json ("unknown" in the table), never the sum of
// its known rows, and counts those rows in unknown_token_rows (README,
// "ledger report": an unknown value is never 0).
func TestReportGroupOfUnknownTokensNeverPrintsASum(t *testing.T) {
	tests := []struct {
		name string
		row  ledger.ReportRow
		// nulls are the columns that must be null; every other token
		// column must be a number.
		nulls   []string
		unknown float64 // unknown_token_rows
	}{
		{"every count known", ledger.ReportRow{Requests: 2, InputTokens: 10, OutputTokens: 4, TotalTokens: 14, CachedInputTokens: 3, ReasoningTokens: 1},
			nil, 0},
		{"an unsettled row", ledger.ReportRow{Requests: 3, InputTokens: 10, OutputTokens: 4, TotalTokens: 14, TokensUnknown: 1, InputUnknown: 1, OutputUnknown: 1, CachedUnknown: 1, ReasoningUnknown: 1},
			[]string{"input_tokens", "output_tokens", "total_tokens", "cached_input_tokens", "reasoning_tokens"}, 1},
		{"a row of unknown input only", ledger.ReportRow{Requests: 2, InputTokens: 10, OutputTokens: 4, TotalTokens: 14, InputUnknown: 1},
			[]string{"input_tokens", "cached_input_tokens"}, 1},
		{"no row reports cached or reasoning tokens", ledger.ReportRow{Requests: 2, InputTokens: 10, OutputTokens: 4, TotalTokens: 14, CachedUnknown: 2, ReasoningUnknown: 2},
			[]string{"cached_input_tokens", "reasoning_tokens"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.row.Keys = []string{"responses"}
			tt.row.CostKnown = true
			var out bytes.Buffer
			if err := reportRecords([]string{"operation"}, []ledger.ReportRow{tt.row}).write(&out, FormatJSON); err != nil {
				t.Fatal(err)
			}
			var got []map[string]any
			if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 1 {
				t.Fatalf("report json %q: %v", out.String(), err)
			}
			null := map[string]bool{}
			for _, c := range tt.nulls {
				null[c] = true
			}
			for _, c := range []string{"input_tokens", "output_tokens", "total_tokens", "cached_input_tokens", "reasoning_tokens"} {
				if v, isNull := got[0][c], got[0][c] == nil; isNull != null[c] {
					t.Errorf("%s = %v, want null: %v", c, v, null[c])
				}
			}
			if got[0]["unknown_token_rows"] != tt.unknown {
				t.Errorf("unknown_token_rows = %v, want %v", got[0]["unknown_token_rows"], tt.unknown)
			}
		})
	}
}
