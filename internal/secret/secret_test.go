package secret

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const canary = "sk-canary-1234567890abcdef"

func TestValueNeverFormatsItself(t *testing.T) {
	v := New(canary)
	type holder struct {
		Key  Value
		Name string
	}
	h := holder{Key: v, Name: "team-a"}
	outs := map[string]string{
		"%v":   fmt.Sprintf("%v", v),
		"%s":   fmt.Sprintf("%s", v),
		"%q":   fmt.Sprintf("%q", v),
		"%x":   fmt.Sprintf("%x", v),
		"%#v":  fmt.Sprintf("%#v", v),
		"%+v":  fmt.Sprintf("%+v", h),
		"%#vh": fmt.Sprintf("%#v", h),
		"err":  fmt.Errorf("wrap: %v", v).Error(),
		"errw": errors.New(fmt.Sprint(v)).Error(),
	}
	b, _ := json.Marshal(h)
	outs["json"] = string(b)
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "key", v, "holder", h)
	outs["slog"] = buf.String()
	for name, out := range outs {
		if strings.Contains(out, canary) || strings.Contains(out, "canary") {
			t.Errorf("%s output leaks the secret: %s", name, out)
		}
	}
	if v.Reveal() != canary {
		t.Errorf("Reveal() = %q, want the raw secret", v.Reveal())
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"abc", "abc", true},
		{"abc", "abd", false},
		{"abc", "ab", false},
		{"", "", true},
	}
	for _, tt := range tests {
		if got := New(tt.a).Equal(New(tt.b)); got != tt.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := New(tt.a).EqualHash(New(tt.b).Hash()); got != tt.want {
			t.Errorf("EqualHash(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestFingerprintIsStableAndOpaque(t *testing.T) {
	a, b := New(canary).Fingerprint(), New(canary).Fingerprint()
	if a != b || len(a) != 8 {
		t.Fatalf("Fingerprint() = %q, %q; want two equal 8-char digests", a, b)
	}
	if New(canary+"x").Fingerprint() == a {
		t.Error("different secrets share a fingerprint")
	}
	if strings.Contains(canary, a) {
		t.Error("fingerprint is a substring of the secret")
	}
}

// Each rendering method, called directly rather than through fmt (whose
// Format hook would hide a leak in String or GoString), and the encoders
// that use TextMarshaler, yield the placeholder.
func TestEveryRenderingMethodIsRedacted(t *testing.T) {
	v := New(canary)
	text, _ := v.MarshalText()
	js, _ := v.MarshalJSON()
	x, err := xml.Marshal(struct {
		XMLName xml.Name `xml:"cred"`
		Key     Value    `xml:"key,attr"`
	}{Key: v})
	if err != nil {
		t.Fatal(err)
	}
	mapKey, _ := json.Marshal(map[Value]int{v: 1})
	var tbuf bytes.Buffer
	slog.New(slog.NewTextHandler(&tbuf, nil)).Info("x", "key", v)
	outs := map[string]string{
		"String":      v.String(),
		"GoString":    v.GoString(),
		"MarshalText": string(text),
		"MarshalJSON": string(js),
		"LogValue":    v.LogValue().String(),
		"xml attr":    string(x),
		"json key":    string(mapKey),
		"slog text":   tbuf.String(),
	}
	for name, out := range outs {
		if strings.Contains(out, "canary") {
			t.Errorf("%s leaks the secret: %s", name, out)
		}
		if !strings.Contains(out, "[redacted]") {
			t.Errorf("%s = %q, want the placeholder", name, out)
		}
	}
}

func TestIsZeroAndLen(t *testing.T) {
	if !(Value{}).IsZero() || !New("").IsZero() {
		t.Error("empty secret is not zero")
	}
	if New("k").IsZero() {
		t.Error("one-byte secret is zero")
	}
	if n := New(canary).Len(); n != len(canary) {
		t.Errorf("Len() = %d, want %d", n, len(canary))
	}
}

// HMAC is HMAC-SHA-256 keyed by the secret over msg: identities built on it
// differ by message and by key.
func TestHMACIsKeyedOverTheMessage(t *testing.T) {
	m := hmac.New(sha256.New, []byte(canary))
	m.Write([]byte("api/gpt-x"))
	if got := New(canary).HMAC([]byte("api/gpt-x")); !hmac.Equal(got, m.Sum(nil)) {
		t.Errorf("HMAC = %x, want %x", got, m.Sum(nil))
	}
	if bytes.Equal(New(canary).HMAC([]byte("a")), New(canary).HMAC([]byte("b"))) {
		t.Error("two messages share an HMAC")
	}
}
