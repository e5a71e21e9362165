package httpx

import (
	"net/url"
	"testing"
)

// FuzzAccessInfoMerge: a record from a runtime never panics the bridge,
// and whatever it sets survives another round trip unchanged.
func FuzzAccessInfoMerge(f *testing.F) {
	for _, s := range []string{"", "pool=api&model=m&code=x&attempts=2&in=5&out=-1&total=9&recorded=1", "%zz", "attempts=99999999999999999999",
		"in=1e3&op=decisions&cred=a%26b", (&AccessInfo{Pool: "zdr", Model: "a b"}).Encode()} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var a AccessInfo
		a.Merge(s)
		var b AccessInfo
		b.Merge(a.Encode())
		if a.Encode() != b.Encode() {
			t.Errorf("round trip of %q: %q then %q", s, a.Encode(), b.Encode())
		}
		if _, err := url.ParseQuery(a.Encode()); err != nil {
			t.Errorf("encoded %q does not parse: %v", a.Encode(), err)
		}
	})
}
