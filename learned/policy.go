package learned

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of LEARNED_COOLDOWN_POLICY_JSON.
const (
	// MaxPolicyBytes is the largest policy, in bytes of JSON (32 KiB).
	MaxPolicyBytes = 32 * 1024
	// MaxPolicyBuckets is the most entries of the buckets array.
	MaxPolicyBuckets = 128
	// MaxNameLength is the longest provider, model or quota bucket name, in
	// bytes.
	MaxNameLength = 256
)

// ErrInvalidPolicy is what ParsePolicy's errors wrap. Their messages name
// the offending bucket index and, for the three known fields, the field,
// but never a value or an unknown key: a secret pasted into the wrong
// setting must not reach a log.
var ErrInvalidPolicy = errors.New("invalid learned cooldown policy")

// wildcards are the characters that would make a name a pattern (path.Match
// syntax). Names match exactly, so a policy containing them is refused
// rather than silently never matching.
const wildcards = "*?[]"

// Scope is one policy entry: a provider (the pool name, api or zdr), a
// model and a quota bucket. A nil Model or QuotaBucket is JSON null; at
// least one is non-nil.
type Scope struct {
	Provider    string
	Model       *string
	QuotaBucket *string
}

// scopeKey is a Scope as a comparable value; "" stands for null, which is
// unambiguous because names are never empty.
type scopeKey struct{ provider, model, bucket string }

func (s Scope) key() scopeKey {
	k := scopeKey{provider: s.Provider}
	if s.Model != nil {
		k.model = *s.Model
	}
	if s.QuotaBucket != nil {
		k.bucket = *s.QuotaBucket
	}
	return k
}

// Policy is a parsed LEARNED_COOLDOWN_POLICY_JSON: the set of scopes that
// learn. The zero value and a nil *Policy are the empty policy, which
// learns nothing. A Policy is immutable and safe for concurrent use.
type Policy struct {
	scopes []Scope
	index  map[scopeKey]struct{}
}

// ParsePolicy parses a policy strictly. An empty (or blank) raw and "{}"
// are the empty policy. Otherwise raw must be at most 32 KiB of valid UTF-8
// JSON: an object with no key but "buckets", an array of at most 128
// objects with exactly the keys "provider", "model" and "quota_bucket".
// Provider is a nonempty string; model and quota_bucket are nonempty
// strings or null, not both null. Names are at most 256 bytes, without
// control or format characters, U+FFFD, surrounding white space or the
// wildcards * ? [ ]. Keys are compared after JSON unescaping and exactly, so
// "\u0070rovider" is provider (and a second one a duplicate) while
// "Provider" is an unknown field. Duplicate fields, duplicate scopes and
// trailing data are refused.
func ParsePolicy(raw string) (*Policy, error) {
	if len(raw) > MaxPolicyBytes {
		return nil, policyError("larger than 32 KiB")
	}
	if strings.Trim(raw, " \t\r\n") == "" {
		return &Policy{}, nil
	}
	if !utf8.ValidString(raw) {
		return nil, policyError("not valid UTF-8")
	}
	d := &policyDecoder{dec: json.NewDecoder(strings.NewReader(raw))}
	d.dec.UseNumber()
	p, err := d.policy()
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Matches reports whether the event scope (provider, model, bucket) learns:
// an exact match of a policy entry, "" standing for null.
func (p *Policy) Matches(provider, model, bucket string) bool {
	if p == nil || provider == "" || len(p.index) == 0 {
		return false
	}
	_, ok := p.index[scopeKey{provider, model, bucket}]
	return ok
}

// Len is the number of scopes.
func (p *Policy) Len() int {
	if p == nil {
		return 0
	}
	return len(p.scopes)
}

// Scopes returns a copy of the scopes in policy order.
func (p *Policy) Scopes() []Scope {
	if p == nil {
		return nil
	}
	out := make([]Scope, len(p.scopes))
	for i, s := range p.scopes {
		out[i] = Scope{Provider: s.Provider, Model: cloneString(s.Model), QuotaBucket: cloneString(s.QuotaBucket)}
	}
	return out
}

// MarshalJSON encodes the policy canonically: {"buckets":[...]} with the
// three fields of each entry in order. ParsePolicy accepts the result and
// returns an equal policy.
func (p *Policy) MarshalJSON() ([]byte, error) {
	type entry struct {
		Provider    string  `json:"provider"`
		Model       *string `json:"model"`
		QuotaBucket *string `json:"quota_bucket"`
	}
	doc := struct {
		Buckets []entry `json:"buckets"`
	}{Buckets: []entry{}}
	for _, s := range p.Scopes() {
		doc.Buckets = append(doc.Buckets, entry(s))
	}
	return json.Marshal(doc)
}

func cloneString(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

func policyError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidPolicy}, args...)...)
}

// policyDecoder walks the JSON tokens of a policy. encoding/json's
// Unmarshal is not used on purpose: it keeps the last of duplicate keys and
// matches keys case-insensitively, both of which the spec refuses.
type policyDecoder struct {
	dec *json.Decoder
}

// token reads the next token and hides the decoder's syntax errors, which
// quote input characters, behind an offset.
func (d *policyDecoder) token() (json.Token, error) {
	tok, err := d.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, policyError("unexpected end of JSON")
		}
		return nil, policyError("malformed JSON near byte %d", d.dec.InputOffset())
	}
	return tok, nil
}

func (d *policyDecoder) expectDelim(want json.Delim, what string) error {
	tok, err := d.token()
	if err != nil {
		return err
	}
	if got, ok := tok.(json.Delim); !ok || got != want {
		return policyError("%s", what)
	}
	return nil
}

func (d *policyDecoder) policy() (*Policy, error) {
	if err := d.expectDelim('{', "policy must be a JSON object"); err != nil {
		return nil, err
	}
	p := &Policy{index: make(map[scopeKey]struct{})}
	seen := false
	for d.dec.More() {
		tok, err := d.token()
		if err != nil {
			return nil, err
		}
		if key, _ := tok.(string); key != "buckets" {
			return nil, policyError("unknown field in policy object")
		}
		if seen {
			return nil, policyError("duplicate field %q", "buckets")
		}
		seen = true
		if err := d.buckets(p); err != nil {
			return nil, err
		}
	}
	if err := d.expectDelim('}', "policy must be a JSON object"); err != nil {
		return nil, err
	}
	if _, err := d.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, policyError("trailing data after policy object")
	}
	return p, nil
}

func (d *policyDecoder) buckets(p *Policy) error {
	if err := d.expectDelim('[', "buckets must be an array"); err != nil {
		return err
	}
	for i := 0; d.dec.More(); i++ {
		if i == MaxPolicyBuckets {
			return policyError("more than %d buckets", MaxPolicyBuckets)
		}
		s, err := d.scope(i)
		if err != nil {
			return err
		}
		k := s.key()
		if _, dup := p.index[k]; dup {
			return policyError("bucket %d: duplicate scope", i)
		}
		p.index[k] = struct{}{}
		p.scopes = append(p.scopes, s)
	}
	return d.expectDelim(']', "buckets must be an array")
}

func (d *policyDecoder) scope(i int) (Scope, error) {
	if err := d.expectDelim('{', fmt.Sprintf("bucket %d: must be an object", i)); err != nil {
		return Scope{}, err
	}
	var s Scope
	var have [3]bool
	for d.dec.More() {
		tok, err := d.token()
		if err != nil {
			return Scope{}, err
		}
		key, _ := tok.(string)
		field := -1
		switch key {
		case "provider":
			field = 0
		case "model":
			field = 1
		case "quota_bucket":
			field = 2
		default:
			return Scope{}, policyError("bucket %d: unknown field", i)
		}
		if have[field] {
			return Scope{}, policyError("bucket %d: duplicate field %q", i, key)
		}
		have[field] = true
		v, err := d.name(i, key, field != 0)
		if err != nil {
			return Scope{}, err
		}
		switch field {
		case 0:
			s.Provider = *v
		case 1:
			s.Model = v
		case 2:
			s.QuotaBucket = v
		}
	}
	if err := d.expectDelim('}', fmt.Sprintf("bucket %d: must be an object", i)); err != nil {
		return Scope{}, err
	}
	for f, name := range []string{"provider", "model", "quota_bucket"} {
		if !have[f] {
			return Scope{}, policyError("bucket %d: missing field %q", i, name)
		}
	}
	if s.Model == nil && s.QuotaBucket == nil {
		return Scope{}, policyError("bucket %d: model and quota_bucket are both null", i)
	}
	return s, nil
}

// name reads the value of field key: a valid name, or null when nullable
// (returned as nil).
func (d *policyDecoder) name(i int, key string, nullable bool) (*string, error) {
	tok, err := d.token()
	if err != nil {
		return nil, err
	}
	if tok == nil && nullable {
		return nil, nil
	}
	v, ok := tok.(string)
	if !ok {
		if nullable {
			return nil, policyError("bucket %d: %q must be a string or null", i, key)
		}
		return nil, policyError("bucket %d: %q must be a string", i, key)
	}
	if reason := checkName(v); reason != "" {
		return nil, policyError("bucket %d: %q %s", i, key, reason)
	}
	return &v, nil
}

// checkName returns why s is not a valid scope name, or "".
func checkName(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > MaxNameLength:
		return "is too long"
	case strings.ContainsAny(s, wildcards):
		return "contains a wildcard"
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return "has surrounding white space"
	}
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) ||
			r == '\u2028' || r == '\u2029' {
			return "contains a control character"
		}
	}
	return ""
}
