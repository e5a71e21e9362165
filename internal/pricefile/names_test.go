package pricefile

import (
	"strings"
	"testing"
)

// ParseDecimal takes plain decimals with a short exponent, up to 64
// characters; never a sign, a fraction or a long exponent (1e-1000 would
// build a number of a thousand digits for nothing).
func TestParseDecimal(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"0", true},
		{"2.5", true},
		{"1.5e-07", true},
		{"1E+3", true},
		{"1e-999", true},
		{"1e-1000", false},
		{"1e1000", false},
		{"-1", false},
		{"+1", false},
		{"1/3", false},
		{".5", false},
		{"5.", false},
		{"0x10", false},
		{"", false},
		{"0." + strings.Repeat("1", 62), true},  // 64 characters
		{"0." + strings.Repeat("1", 63), false}, // 65
	} {
		if _, ok := ParseDecimal(tc.in); ok != tc.ok {
			t.Errorf("ParseDecimal(%q) ok = %v, want %v", tc.in, ok, tc.ok)
		}
	}
}

// A model rotor can price is 1-256 bytes of printing UTF-8 without white
// space, and without the api/ or zdr/ a caller writes before it.
func TestModelOK(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		valid    bool
		prefix   string
	}{
		{"plain", "gpt-4.1-mini", true, ""},
		{"provider path", "openai/gpt-4o", true, ""},
		{"256 bytes", strings.Repeat("m", 256), true, ""},
		{"257 bytes", strings.Repeat("m", 257), false, ""},
		{"empty", "", false, ""},
		{"space", "gpt 4o", false, ""},
		{"no-break space", "gpt\u00a04o", false, ""},
		{"tab", "gpt\t4o", false, ""},
		{"zero-width space", "gpt\u200b4o", false, ""},
		{"bidi override", "gpt\u202e4o", false, ""},
		{"invalid UTF-8", "gpt\xff", false, ""},
		{"api prefix", "api/gpt-4o", true, "api/"},
		{"zdr prefix", "zdr/gpt-4o", true, "zdr/"},
		{"prefix-like", "apix/gpt-4o", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidModel(tc.in); got != tc.valid {
				t.Errorf("ValidModel(%q) = %v, want %v", tc.in, got, tc.valid)
			}
			if got := CallerPrefix(tc.in); got != tc.prefix {
				t.Errorf("CallerPrefix(%q) = %q, want %q", tc.in, got, tc.prefix)
			}
			if got, want := ModelOK(tc.in), tc.valid && tc.prefix == ""; got != want {
				t.Errorf("ModelOK(%q) = %v, want %v", tc.in, got, want)
			}
		})
	}
}

// --provider azure takes the keys under azure/, not those of another
// provider whose name starts the same (azure_ai/); sample_spec is never a
// model, whatever it holds; a model under a caller prefix is skipped.
func TestParseLiteLLMSkips(t *testing.T) {
	file := []byte(`{
  "azure/gpt-4o": {"input_cost_per_token": 2e-06, "output_cost_per_token": 8e-06},
  "azure_ai/mistral": {"input_cost_per_token": 1e-06, "output_cost_per_token": 3e-06},
  "azuregpt": {"input_cost_per_token": 1e-06, "output_cost_per_token": 3e-06},
  "sample_spec": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06},
  "zdr/gpt-4o": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-06}
}`)
	prices, skipped, err := ParseLiteLLM(file, "azure")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range prices {
		got = append(got, p.Model)
	}
	if strings.Join(got, ",") != "azuregpt,gpt-4o" || skipped != 3 {
		t.Errorf("--provider azure took %q, skipped %d; want azuregpt,gpt-4o and 3 skipped", got, skipped)
	}
}

// A negative number is named as a number.
func TestParseLiteLLMNamesANegativeNumber(t *testing.T) {
	_, _, err := ParseLiteLLM([]byte("-1"), "")
	if err == nil || !strings.Contains(err.Error(), "a number") {
		t.Errorf("ParseLiteLLM(-1) = %v, want an error saying a number", err)
	}
}
