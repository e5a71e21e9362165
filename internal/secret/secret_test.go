package secret

import (
	"bytes"
	"encoding/json"
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
