package learned

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzPolicy checks ParsePolicy against an independent reading of the
// rules (policyOracle): it never panics, accepts exactly what the rules
// allow with the same scopes, and an accepted policy re-encodes to JSON
// that parses to the same policy. Its errors never quote the input.
func FuzzPolicy(f *testing.F) {
	for _, seed := range []string{
		"", "{}", " {} ", `{"buckets":[]}`, testPolicy,
		buckets(entry("api", "m", nil)),
		buckets(entry("api", nil, "b")),
		buckets(entry("api", nil, nil)),
		buckets(entry("api", "m", nil), entry("api", "m", nil)),
		buckets(entry("api", "decide-*", nil)),
		`{"buckets":[{"provider":"api","\u0070rovider":"zdr","model":"m","quota_bucket":null}]}`,
		`{"buckets":[{"Provider":"api","model":"m","quota_bucket":null}]}`,
		`{"buckets":[{"provider":"api","model":"m\u0000","quota_bucket":null}]}`,
		`{"buckets":[{"provider":"api","model":"m\ud800","quota_bucket":null}]}`,
		`{"buckets":[{"provider":"api","model":"m","quota_bucket":null,"x":1}]}`,
		`{"buckets":[],"buckets":[]}`,
		`{"buckets":null}`, `[]`, `null`, `{} {}`, `{"buckets":[{}]}`,
		`{"buckets":[{"provider":"api","model":" m","quota_bucket":null}]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := ParsePolicy(raw)
		if len(raw) > MaxPolicyBytes {
			// Refused before it is read; keep the fuzzer's time for the rest.
			if err == nil {
				t.Fatalf("ParsePolicy accepted %d bytes", len(raw))
			}
			return
		}
		want, ok := policyOracle(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("ParsePolicy(%q) = %v, not an ErrInvalidPolicy", raw, err)
			}
			if ok {
				t.Fatalf("ParsePolicy(%q) = %v; the rules allow it", raw, err)
			}
			checkErrorQuotesNothing(t, raw, err)
			return
		}
		if !ok {
			t.Fatalf("ParsePolicy(%q) accepted %d scopes; the rules refuse it", raw, p.Len())
		}
		if got := p.Scopes(); !reflect.DeepEqual(got, want) {
			t.Fatalf("ParsePolicy(%q) scopes = %v, want %v", raw, got, want)
		}
		enc, err := p.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON = %v", err)
		}
		again, err := ParsePolicy(string(enc))
		if err != nil {
			t.Fatalf("re-parse of %s = %v", enc, err)
		}
		if !reflect.DeepEqual(again.Scopes(), p.Scopes()) {
			t.Fatalf("round trip of %q: %v, want %v", raw, again.Scopes(), p.Scopes())
		}
		for _, s := range want {
			if !p.Matches(s.Provider, deref(s.Model), deref(s.QuotaBucket)) {
				t.Fatalf("policy %q does not match its own scope %v", raw, s)
			}
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// checkErrorQuotesNothing fails when err repeats a run of the input that
// is not part of the fixed vocabulary of error messages.
func checkErrorQuotesNothing(t *testing.T, raw string, err error) {
	msg := err.Error()
	for _, word := range strings.FieldsFunc(raw, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(word) >= 12 && strings.Contains(msg, word) {
			t.Fatalf("ParsePolicy error %q quotes the input %q", msg, word)
		}
	}
}

// policyOracle decides a policy by the spec's rules, written apart from
// the parser: a generic duplicate-key scan, then encoding/json into any.
func policyOracle(raw string) ([]Scope, bool) {
	if len(raw) > 32*1024 {
		return nil, false
	}
	if strings.TrimLeft(raw, " \t\r\n") == "" {
		return []Scope{}, true
	}
	if !utf8.ValidString(raw) || !json.Valid([]byte(raw)) || hasDuplicateKeys(raw) {
		return nil, false
	}
	var doc any
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&doc) != nil {
		return nil, false
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, false
	}
	scopes := []Scope{}
	for k, v := range top {
		list, ok := v.([]any)
		if k != "buckets" || !ok || len(list) > 128 {
			return nil, false
		}
		seen := map[[5]string]bool{}
		for _, item := range list {
			e, ok := item.(map[string]any)
			if !ok || len(e) != 3 {
				return nil, false
			}
			provider, ok := e["provider"].(string)
			if !ok || !oracleName(provider) {
				return nil, false
			}
			var s Scope
			s.Provider = provider
			var key [5]string
			key[0] = provider
			for i, field := range []string{"model", "quota_bucket"} {
				v, present := e[field]
				if !present {
					return nil, false
				}
				if v == nil {
					continue
				}
				name, ok := v.(string)
				if !ok || !oracleName(name) {
					return nil, false
				}
				key[1+2*i], key[2+2*i] = "set", name
				if i == 0 {
					s.Model = &name
				} else {
					s.QuotaBucket = &name
				}
			}
			if s.Model == nil && s.QuotaBucket == nil || seen[key] {
				return nil, false
			}
			seen[key] = true
			scopes = append(scopes, s)
		}
	}
	return scopes, true
}

// oracleName: a nonempty name of at most 256 bytes, no wildcard, control,
// format or replacement character, no surrounding white space.
func oracleName(s string) bool {
	if s == "" || len(s) > 256 || strings.TrimSpace(s) != s {
		return false
	}
	for _, r := range s {
		switch {
		case r == '*' || r == '?' || r == '[' || r == ']':
			return false
		case unicode.In(r, unicode.Cc, unicode.Cf) || r == '\uFFFD' || r == '\u2028' || r == '\u2029':
			return false
		}
	}
	return true
}

// hasDuplicateKeys reports whether any object in raw (valid JSON) has two
// keys that are equal once unescaped.
func hasDuplicateKeys(raw string) bool {
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	type frame struct {
		object bool
		keys   map[string]bool
		want   bool // the next string token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return true
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if top != nil && top.object {
					top.want = true // the value is complete once closed
				}
				stack = append(stack, &frame{object: d == '{', keys: map[string]bool{}, want: d == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if top == nil || !top.object {
			continue
		}
		if top.want {
			key := tok.(string)
			if top.keys[key] {
				return true
			}
			top.keys[key] = true
			top.want = false
		} else {
			top.want = true
		}
	}
}
