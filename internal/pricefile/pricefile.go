// Package pricefile reads the community price file LiteLLM publishes
// (model_prices_and_context_window.json) into prices in micro-USD per 1M
// tokens, exactly: numbers are read as decimals, never through a float.
// It also holds the rules `rotor pricing set` applies to a price and a
// model name, so both ways of setting a price agree.
//
// It imports no other rotor package (ledger.MaxPriceMicros is MaxMicros),
// so its fuzz test builds without SQLite.
package pricefile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMicros bounds a price: $1,000,000 per 1M tokens, in micro-USD per 1M
// tokens. ledger.MaxPriceMicros is this bound.
const MaxMicros = 1_000_000_000_000

// Price is a model's price read from the file, in micro-USD per 1M tokens.
type Price struct {
	// Model is the model as sent upstream: a bare name (ModelOK).
	Model        string
	InputMicros  int64
	OutputMicros int64
	// CachedInputMicros is the cached input's price when CachedKnown;
	// otherwise it is 0 and cached input costs as input.
	CachedInputMicros int64
	CachedKnown       bool
}

// decimalRE is a plain decimal, with an optional exponent as JSON writes
// small numbers (1.5e-07): never a fraction, a sign or a hex number.
var decimalRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]{1,3})?$`)

// ParseDecimal reads s exactly (never through a float).
func ParseDecimal(s string) (*big.Rat, bool) {
	if len(s) > 64 || !decimalRE.MatchString(s) {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// Micros returns r x scale as an integer count of micro-USD per 1M
// tokens, rounded half up (exact: only r x scale of more than 6
// decimals of a micro-USD rounds); ok=false above MaxMicros.
func Micros(r *big.Rat, scale int64) (int64, bool) {
	v := new(big.Rat).Mul(r, new(big.Rat).SetInt64(scale))
	v.Add(v, big.NewRat(1, 2))
	n := new(big.Int).Quo(v.Num(), v.Denom())
	if !n.IsInt64() || n.Int64() > MaxMicros {
		return 0, false
	}
	return n.Int64(), true
}

// ValidModel reports whether model can name a model at all: not empty, at
// most 256 bytes of UTF-8, of printing characters only: no spaces, control
// or format characters (a zero-width space, a byte-order mark, a bidi
// override), which would make a price that looks like a model's and never
// matches it.
func ValidModel(model string) bool {
	return model != "" && len(model) <= 256 && utf8.ValidString(model) &&
		strings.IndexFunc(model, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsGraphic(r) }) < 0
}

// CallerPrefix returns the prefix a caller writes before a model ("api/"
// or "zdr/") that model starts with, or "": prices are for the model as
// sent upstream, without it.
func CallerPrefix(model string) string {
	for _, p := range []string{"api/", "zdr/"} {
		if strings.HasPrefix(model, p) {
			return p
		}
	}
	return ""
}

// ModelOK reports whether rotor can price model: ValidModel, with no
// CallerPrefix.
func ModelOK(model string) bool { return ValidModel(model) && CallerPrefix(model) == "" }

// liteLLMEntry is the part of an entry of LiteLLM's price file rotor
// reads. Numbers stay json.Number: never a float.
type liteLLMEntry struct {
	Input  json.Number `json:"input_cost_per_token"`
	Output json.Number `json:"output_cost_per_token"`
	Cached json.Number `json:"cache_read_input_token_cost"`
}

// ParseLiteLLM reads LiteLLM's model_prices_and_context_window.json into
// prices, sorted by model, and counts the entries it skipped. It takes the
// entries keyed by a bare model name (ModelOK, no "/") with a nonzero input
// or output price; with a provider, also the keys under provider/, without
// the prefix (the rest may hold a "/": openrouter/openai/gpt-4o is
// openai/gpt-4o), over a bare key of the same model. Only a file that is not
// a JSON object is an error.
func ParseLiteLLM(data []byte, provider string) ([]Price, int, error) {
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		// json.Unmarshal takes null for an empty map and names Go
		// types for the rest: say what the file holds instead.
		return nil, 0, fmt.Errorf("not a LiteLLM price file: want a JSON object of models, the file holds %s", jsonKind(t))
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, 0, fmt.Errorf("not a LiteLLM price file (a JSON object of models): %v", err)
	}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	byModel := map[string]Price{}
	fromProvider := map[string]bool{}
	skipped := 0
	for _, key := range keys {
		model, own := key, false
		if provider != "" && strings.HasPrefix(key, provider+"/") {
			model, own = strings.TrimPrefix(key, provider+"/"), true
		}
		p, ok := liteLLMPrice(model, entries[key])
		// A bare key with a "/" is another provider's; the provider's own
		// keys keep theirs: OpenRouter's openrouter/openai/gpt-4o prices
		// the model openai/gpt-4o, as rotor sends it upstream.
		if !ok || key == "sample_spec" || !own && strings.Contains(model, "/") || !ModelOK(model) {
			skipped++
			continue
		}
		if _, dup := byModel[model]; dup {
			// A bare key and the provider's key of one model: the
			// provider's wins, the other is skipped.
			skipped++
			if fromProvider[model] && !own {
				continue
			}
		}
		byModel[model], fromProvider[model] = p, own
	}
	out := make([]Price, 0, len(byModel))
	for _, p := range byModel {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out, skipped, nil
}

// liteLLMPrice reads one entry; ok=false for an entry rotor cannot use:
// not an object, a price that is not a plain non-negative number, or no
// nonzero input or output price.
func liteLLMPrice(model string, raw json.RawMessage) (Price, bool) {
	var e liteLLMEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&e); err != nil {
		return Price{}, false
	}
	p := Price{Model: model}
	for _, f := range []struct {
		n   json.Number
		dst *int64
	}{{e.Input, &p.InputMicros}, {e.Output, &p.OutputMicros}, {e.Cached, &p.CachedInputMicros}} {
		if f.n == "" {
			continue
		}
		r, ok := ParseDecimal(string(f.n))
		if !ok {
			return p, false
		}
		// USD per token x 10^12 = micro-USD per 1M tokens.
		if *f.dst, ok = Micros(r, 1_000_000_000_000); !ok {
			return p, false
		}
	}
	p.CachedKnown = e.Cached != ""
	if p.InputMicros == 0 && p.OutputMicros == 0 {
		return p, false
	}
	return p, true
}

// jsonKind names what a JSON text that is not an object starts with.
func jsonKind(t []byte) string {
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '[':
		return "an array"
	case 'n':
		return "null"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	if t[0] == '-' || t[0] >= '0' && t[0] <= '9' {
		return "a number"
	}
	return "no JSON"
}
