package pricefile

import (
	"strings"
	"testing"
)

// LiteLLM's per-token prices carry more decimals than a micro-USD per 1M
// tokens holds (1e-12 USD); such a price is stored rounded half up, never
// truncated, so a price of 6.666666666666667e-07 USD per token is $0.666667
// per 1M tokens (not $0.666666), half a micro-USD (5e-13) rounds up to one,
// and less than half (4.99e-13) rounds down to zero.
func TestParseLiteLLMRoundsHalfUp(t *testing.T) {
	prices, skipped, err := ParseLiteLLM([]byte(`{"m":{"input_cost_per_token":6.666666666666667e-07,"output_cost_per_token":5e-13,"cache_read_input_token_cost":4.99e-13},`+
		`"exact":{"input_cost_per_token":1.5e-07,"output_cost_per_token":0.0000006}}`), "")
	if err != nil || skipped != 0 || len(prices) != 2 {
		t.Fatalf("ParseLiteLLM = %+v, %d skipped, %v", prices, skipped, err)
	}
	if p := prices[0]; p.Model != "exact" || p.InputMicros != 150_000 || p.OutputMicros != 600_000 || p.CachedKnown {
		t.Errorf("exact = %+v, want 150000 and 600000 micro-USD per 1M, no cached price", p)
	}
	if p := prices[1]; p.Model != "m" || p.InputMicros != 666_667 || p.OutputMicros != 1 || p.CachedInputMicros != 0 || !p.CachedKnown {
		t.Errorf("m = %+v, want 666667 input, 1 output, a known 0 cached (half up)", p)
	}
}

// The price file is untrusted input: parsing never panics, and every price
// it returns is one the ledger accepts (0..MaxMicros, which
// ledger.MaxPriceMicros is), for a bare model name, with a nonzero input or
// output price.
func FuzzParseLiteLLM(f *testing.F) {
	f.Add([]byte(`{"m":{"input_cost_per_token":1e-06,"output_cost_per_token":2e-06,"cache_read_input_token_cost":5e-07}}`), "")
	f.Add([]byte(`{"azure/m":{"input_cost_per_token":"1e-06"},"sample_spec":{}}`), "azure")
	f.Add([]byte(`{"m":{"input_cost_per_token":1e999999,"output_cost_per_token":-1}}`), "")
	f.Add([]byte(`[1,2]`), "")
	f.Fuzz(func(t *testing.T, data []byte, provider string) {
		prices, skipped, err := ParseLiteLLM(data, provider)
		if err != nil {
			return
		}
		if skipped < 0 {
			t.Fatalf("skipped %d", skipped)
		}
		for _, p := range prices {
			if p.Model == "" || provider == "" && strings.Contains(p.Model, "/") || !ModelOK(p.Model) {
				t.Fatalf("price %+v: not a model name rotor can price (bare, without --provider)", p)
			}
			for _, v := range []int64{p.InputMicros, p.OutputMicros, p.CachedInputMicros} {
				if v < 0 || v > MaxMicros {
					t.Fatalf("price %+v: %d micro-USD per 1M tokens is outside 0..%d", p, v, int64(MaxMicros))
				}
			}
			if !p.CachedKnown && p.CachedInputMicros != 0 {
				t.Fatalf("price %+v: a cached price that is not known", p)
			}
			if p.InputMicros == 0 && p.OutputMicros == 0 {
				t.Fatalf("zero price %+v taken", p)
			}
		}
	})
}

// --provider NAME takes the keys under NAME/ without the prefix, also when
// the rest holds a "/": OpenRouter, Together or Fireworks name their models
// so (openai/gpt-4o, as sent upstream), and LiteLLM keys them
// openrouter/openai/gpt-4o. Without --provider, such keys stay skipped.
func TestProviderKeysWhoseModelHasASlash(t *testing.T) {
	file := []byte(`{
  "openrouter/openai/gpt-4o": {"input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05},
  "openrouter/anthropic/claude-3.5-sonnet": {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05},
  "gpt-4o": {"input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05}
}`)
	prices, skipped, err := ParseLiteLLM(file, "openrouter")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Price{}
	for _, p := range prices {
		got[p.Model] = p
	}
	if p := got["openai/gpt-4o"]; p.InputMicros != 2_500_000 || p.OutputMicros != 10_000_000 {
		t.Errorf("--provider openrouter: openai/gpt-4o = %+v; took %d, skipped %d", p, len(prices), skipped)
	}
	if _, ok := got["anthropic/claude-3.5-sonnet"]; !ok || len(prices) != 3 || skipped != 0 {
		t.Errorf("--provider openrouter took %v, skipped %d; want the three models", prices, skipped)
	}
	prices, skipped, err = ParseLiteLLM(file, "")
	if err != nil || len(prices) != 1 || prices[0].Model != "gpt-4o" || skipped != 2 {
		t.Errorf("without --provider: %v, %d skipped, %v; want gpt-4o alone, 2 skipped", prices, skipped, err)
	}
}

// A file that is not a JSON object is refused, saying what it holds: null
// imported nothing with success, an array failed with Go's type names.
func TestParseLiteLLMRefusesWhatIsNotAnObject(t *testing.T) {
	for in, want := range map[string]string{
		"null":        "null",
		" [1, 2]":     "an array",
		`"prices"`:    "a string",
		"42":          "a number",
		"":            "nothing",
		"true":        "a boolean",
		"<html>":      "no JSON",
		"{\"a\": 1,}": "not a LiteLLM price file",
	} {
		_, _, err := ParseLiteLLM([]byte(in), "")
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "Go value") {
			t.Errorf("ParseLiteLLM(%q) = %v, want an error saying %q", in, err, want)
		}
	}
	if ps, _, err := ParseLiteLLM([]byte(" {}\n"), ""); err != nil || len(ps) != 0 {
		t.Errorf("ParseLiteLLM({}) = %v, %v; want no prices and no error", ps, err)
	}
}
