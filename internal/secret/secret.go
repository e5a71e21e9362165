// Package secret holds provider keys and bridge tokens in a type that
// refuses to print itself. Every way of formatting a Value (fmt verbs, slog,
// JSON, text marshalling) yields "[redacted]"; the only way to the raw bytes
// is the explicit, grep-able Reveal.
//
// It imports no other rotor package.
package secret

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
)

const redacted = "[redacted]"

// Value is a secret string. The zero value is an empty secret.
type Value struct {
	s string
}

// New wraps s.
func New(s string) Value { return Value{s: s} }

// Reveal returns the raw secret. Call it only where the secret must leave
// the process (an Authorization header) or be hashed.
func (v Value) Reveal() string { return v.s }

// IsZero reports whether the secret is empty.
func (v Value) IsZero() bool { return v.s == "" }

// Len returns the secret's length in bytes.
func (v Value) Len() int { return len(v.s) }

// String implements fmt.Stringer.
func (Value) String() string { return redacted }

// GoString implements fmt.GoStringer.
func (Value) GoString() string { return "secret.Value(" + redacted + ")" }

// Format implements fmt.Formatter so that every verb, including %x and %q,
// prints the placeholder.
func (Value) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue implements slog.LogValuer.
func (Value) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON implements json.Marshaler.
func (Value) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText implements encoding.TextMarshaler.
func (Value) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Hash returns SHA-256 of the secret. Tokens are stored and compared as
// hashes.
func (v Value) Hash() [32]byte { return sha256.Sum256([]byte(v.s)) }

// Equal compares two secrets in constant time. Both sides are hashed first,
// so the comparison does not leak their lengths either.
func (v Value) Equal(o Value) bool {
	a, b := v.Hash(), o.Hash()
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// EqualHash compares the secret's hash with a stored hash in constant time.
func (v Value) EqualHash(h [32]byte) bool {
	a := v.Hash()
	return subtle.ConstantTimeCompare(a[:], h[:]) == 1
}

// Fingerprint returns a short digest for correlating log lines. It is a
// truncated keyed hash under a fixed label, so it identifies a secret without
// revealing it.
func (v Value) Fingerprint() string {
	if v.s == "" {
		return "none"
	}
	return hex.EncodeToString(v.HMAC([]byte("rotor fingerprint"))[:4])
}

// HMAC returns HMAC-SHA-256 of msg keyed by the secret. Learned-cooldown
// identities use it so that they stay stable across processes yet change when
// a key is rotated.
func (v Value) HMAC(msg []byte) []byte {
	m := hmac.New(sha256.New, []byte(v.s))
	m.Write(msg)
	return m.Sum(nil)
}
