package learned

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func entry(provider string, model, bucket any) string {
	q := func(v any) string {
		if v == nil {
			return "null"
		}
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf(`{"provider":%s,"model":%s,"quota_bucket":%s}`, q(provider), q(model), q(bucket))
}

func buckets(entries ...string) string {
	return `{"buckets":[` + strings.Join(entries, ",") + `]}`
}

func str(s string) *string { return &s }

// checkPolicy runs table cases: want "" accepts, else the error must wrap
// ErrInvalidPolicy and contain want.
func checkPolicy(t *testing.T, cases []struct{ name, raw, want string }) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParsePolicy(c.raw)
			if c.want == "" {
				if err != nil {
					t.Fatalf("ParsePolicy(%q) = %v, want accepted", c.raw, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParsePolicy(%q) accepted %d scopes, want error %q", c.raw, p.Len(), c.want)
			}
			if !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ParsePolicy(%q) = %v, want an ErrInvalidPolicy containing %q", c.raw, err, c.want)
			}
		})
	}
}

func TestEmptyPolicyValuesUseDefault(t *testing.T) {
	for _, raw := range []string{"", " ", "\n\t", "{}", " {} ", `{"buckets":[]}`} {
		p, err := ParsePolicy(raw)
		if err != nil || p.Len() != 0 {
			t.Errorf("ParsePolicy(%q) = %d scopes, %v; want the empty policy", raw, p.Len(), err)
		}
		if p.Matches("api", "decide-mini", "") {
			t.Errorf("the empty policy %q matches a scope", raw)
		}
	}
}

func TestPolicyContainsOnlyBucketsArray(t *testing.T) {
	checkPolicy(t, []struct{ name, raw, want string }{
		{"buckets array", buckets(entry("api", "m", nil)), ""},
		{"top-level array", `[]`, "must be a JSON object"},
		{"top-level null", `null`, "must be a JSON object"},
		{"top-level string", `"{}"`, "must be a JSON object"},
		{"other key", `{"rules":[]}`, "unknown field"},
		{"extra key", `{"buckets":[],"mode":"apply"}`, "unknown field"},
		{"buckets null", `{"buckets":null}`, "buckets must be an array"},
		{"buckets object", `{"buckets":{}}`, "buckets must be an array"},
		{"entry not object", `{"buckets":["api"]}`, "bucket 0: must be an object"},
		{"trailing data", `{} {}`, "trailing data"},
		{"trailing garbage", `{}x`, "trailing data"},
		{"truncated", `{"buckets":[`, "unexpected end"},
		{"malformed", `{"buckets":[}`, "malformed JSON"},
	})
}

func TestPolicyAtMost128Entries(t *testing.T) {
	var es []string
	for i := range MaxPolicyBuckets + 1 {
		es = append(es, entry("api", fmt.Sprintf("m%d", i), nil))
	}
	if p, err := ParsePolicy(buckets(es[:MaxPolicyBuckets]...)); err != nil || p.Len() != MaxPolicyBuckets {
		t.Errorf("128 entries: %v scopes, %v; want accepted", p.Len(), err)
	}
	checkPolicy(t, []struct{ name, raw, want string }{
		{"129 entries", buckets(es...), "more than 128 buckets"},
	})
}

func TestPolicyAtMost32KiB(t *testing.T) {
	// One entry padded with JSON white space to exactly the limit.
	body := buckets(entry("api", "m", nil))
	exact := body[:len(body)-1] + strings.Repeat(" ", MaxPolicyBytes-len(body)) + "}"
	if len(exact) != MaxPolicyBytes {
		t.Fatalf("built %d bytes", len(exact))
	}
	if _, err := ParsePolicy(exact); err != nil {
		t.Errorf("a policy of exactly 32 KiB: %v, want accepted", err)
	}
	checkPolicy(t, []struct{ name, raw, want string }{
		{"32 KiB + 1", exact + " ", "larger than 32 KiB"},
		{"blank but oversized", strings.Repeat(" ", MaxPolicyBytes+1), "larger than 32 KiB"},
	})
}

func TestPolicyEntryRequiresExactlyProviderModelQuotaBucket(t *testing.T) {
	checkPolicy(t, []struct{ name, raw, want string }{
		{"all three", buckets(entry("api", "m", "b")), ""},
		{"any order", `{"buckets":[{"quota_bucket":"b","model":null,"provider":"api"}]}`, ""},
		{"missing provider", `{"buckets":[{"model":"m","quota_bucket":null}]}`, `missing field "provider"`},
		{"missing model", `{"buckets":[{"provider":"api","quota_bucket":"b"}]}`, `missing field "model"`},
		{"missing quota_bucket", `{"buckets":[{"provider":"api","model":"m"}]}`, `missing field "quota_bucket"`},
		{"empty entry", `{"buckets":[{}]}`, "missing field"},
		{"fourth field", `{"buckets":[{"provider":"api","model":"m","quota_bucket":null,"region":"us"}]}`, "unknown field"},
	})
}

func TestPolicyProviderIsNonemptyString(t *testing.T) {
	checkPolicy(t, []struct{ name, raw, want string }{
		{"empty", buckets(entry("", "m", nil)), `"provider" is empty`},
		{"null", `{"buckets":[{"provider":null,"model":"m","quota_bucket":null}]}`, `"provider" must be a string`},
		{"number", `{"buckets":[{"provider":1,"model":"m","quota_bucket":null}]}`, `"provider" must be a string`},
		{"object", `{"buckets":[{"provider":{},"model":"m","quota_bucket":null}]}`, `"provider" must be a string`},
	})
}

func TestPolicyModelAndQuotaBucketAreNonemptyStringsOrNull(t *testing.T) {
	checkPolicy(t, []struct{ name, raw, want string }{
		{"model string, bucket null", buckets(entry("api", "m", nil)), ""},
		{"model null, bucket string", buckets(entry("api", nil, "b")), ""},
		{"empty model", buckets(entry("api", "", "b")), `"model" is empty`},
		{"empty bucket", buckets(entry("api", "m", "")), `"quota_bucket" is empty`},
		{"model number", `{"buckets":[{"provider":"api","model":5,"quota_bucket":null}]}`, `"model" must be a string or null`},
		{"bucket bool", `{"buckets":[{"provider":"api","model":"m","quota_bucket":false}]}`, `"quota_bucket" must be a string or null`},
		{"model array", `{"buckets":[{"provider":"api","model":["m"],"quota_bucket":null}]}`, `"model" must be a string or null`},
		{"surrounding space", buckets(entry("api", " m", nil)), "surrounding white space"},
		// A trailing space is as invisible in a config as a leading one.
		{"trailing space", buckets(entry("api", nil, "b ")), "surrounding white space"},
		{"trailing no-break space", buckets(entry("api", "m\u00a0", nil)), "surrounding white space"},
		{"too long", buckets(entry("api", strings.Repeat("m", MaxNameLength+1), nil)), "too long"},
		{"longest", buckets(entry("api", strings.Repeat("m", MaxNameLength), nil)), ""},
	})
}

func TestPolicyNeedsModelOrQuotaBucket(t *testing.T) {
	checkPolicy(t, []struct{ name, raw, want string }{
		{"both null", buckets(entry("api", nil, nil)), "both null"},
	})
}

func TestPolicyNamesMatchExactlyIncludingNull(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	cases := []struct {
		provider, model, bucket string
		want                    bool
	}{
		{"api", "decide-mini", "", true},
		{"api", "", "shared-decide", true},
		{"zdr", "decide-large", "shared-decide", true},
		{"api", "decide-mini", "shared-decide", false}, // bucket must be null
		{"api", "decide-large", "", false},             // other model
		{"api", "Decide-Mini", "", false},              // case matters
		{"API", "decide-mini", "", false},
		{"zdr", "decide-mini", "", false}, // other provider (pool)
		{"api", "decide-mini ", "", false},
		{"api", "decide", "", false}, // no prefix matching
		{"zdr", "", "shared-decide", false},
		{"zdr", "decide-large", "", false},
		{"", "decide-mini", "", false},
	}
	for _, c := range cases {
		t.Run(c.provider+"/"+c.model+"/"+c.bucket, func(t *testing.T) {
			if got := p.Matches(c.provider, c.model, c.bucket); got != c.want {
				t.Errorf("Matches(%q, %q, %q) = %v, want %v", c.provider, c.model, c.bucket, got, c.want)
			}
		})
	}
	var nilPolicy *Policy
	if nilPolicy.Matches("api", "decide-mini", "") || nilPolicy.Len() != 0 {
		t.Error("a nil policy matches")
	}
}

func TestPolicyRejectsWildcards(t *testing.T) {
	checkPolicy(t, []struct{ name, raw, want string }{
		{"star model", buckets(entry("api", "decide-*", nil)), "wildcard"},
		{"star alone", buckets(entry("api", "*", nil)), "wildcard"},
		{"question mark", buckets(entry("api", "decide-?", nil)), "wildcard"},
		{"class", buckets(entry("api", "decide-[ab]", nil)), "wildcard"},
		{"star bucket", buckets(entry("api", nil, "shared-*")), "wildcard"},
		{"star provider", buckets(entry("*", "m", nil)), "wildcard"},
		{"escaped star", `{"buckets":[{"provider":"api","model":"decide-\u002a","quota_bucket":null}]}`, "wildcard"},
	})
}

func TestPolicyRejectsDuplicateFields(t *testing.T) {
	checkPolicy(t, []struct{ name, raw, want string }{
		{"provider twice", `{"buckets":[{"provider":"api","provider":"zdr","model":"m","quota_bucket":null}]}`, `duplicate field "provider"`},
		{"model twice", `{"buckets":[{"provider":"api","model":"m","model":null,"quota_bucket":"b"}]}`, `duplicate field "model"`},
		{"bucket twice", `{"buckets":[{"provider":"api","model":"m","quota_bucket":null,"quota_bucket":null}]}`, `duplicate field "quota_bucket"`},
		{"escaped spelling", `{"buckets":[{"provider":"api","\u0070rovider":"zdr","model":"m","quota_bucket":null}]}`, `duplicate field "provider"`},
		{"escaped underscore", `{"buckets":[{"provider":"api","model":"m","quota_bucket":null,"quota\u005fbucket":"b"}]}`, `duplicate field "quota_bucket"`},
		{"escaped alone", `{"buckets":[{"\u0070rovider":"api","model":"m","quota_bucket":null}]}`, ""},
		{"case variant", `{"buckets":[{"provider":"api","Provider":"zdr","model":"m","quota_bucket":null}]}`, "unknown field"},
		{"case variant alone", `{"buckets":[{"Provider":"api","model":"m","quota_bucket":null}]}`, "unknown field"},
		{"upper model", `{"buckets":[{"provider":"api","MODEL":"m","quota_bucket":null}]}`, "unknown field"},
		{"buckets twice", `{"buckets":[],"buckets":[]}`, `duplicate field "buckets"`},
		{"buckets escaped twice", `{"buckets":[],"\u0062uckets":[]}`, `duplicate field "buckets"`},
		{"buckets case variant", `{"Buckets":[]}`, "unknown field"},
		{"kelvin sign", `{"buckets":[],"buc\u212aets":[]}`, "unknown field"},
	})
}

func TestPolicyRejectsDuplicateScopes(t *testing.T) {
	checkPolicy(t, []struct{ name, raw, want string }{
		{"same scope", buckets(entry("api", "m", nil), entry("api", "m", nil)), "bucket 1: duplicate scope"},
		{"same with bucket", buckets(entry("api", "m", "b"), entry("zdr", "m", "b"), entry("api", "m", "b")), "bucket 2: duplicate scope"},
		{"escaped same", `{"buckets":[{"provider":"api","model":"m","quota_bucket":null},{"provider":"\u0061pi","model":"\u006d","quota_bucket":null}]}`, "duplicate scope"},
		{"null differs from name", buckets(entry("api", "m", nil), entry("api", "m", "b")), ""},
		{"model vs bucket namespaces", buckets(entry("api", "x", nil), entry("api", nil, "x")), ""},
		{"case differs", buckets(entry("api", "m", nil), entry("api", "M", nil)), ""},
	})
}

func TestPolicyRejectsControlCharacters(t *testing.T) {
	checkPolicy(t, []struct{ name, raw, want string }{
		{"escaped NUL", `{"buckets":[{"provider":"api","model":"m\u0000","quota_bucket":null}]}`, "control character"},
		{"escaped newline", `{"buckets":[{"provider":"api","model":"a\nb","quota_bucket":null}]}`, "control character"},
		{"escaped tab in provider", `{"buckets":[{"provider":"a\tpi","model":"m","quota_bucket":null}]}`, "control character"},
		{"DEL", "{\"buckets\":[{\"provider\":\"api\",\"model\":\"m\x7f\",\"quota_bucket\":null}]}", "control character"},
		{"C1", `{"buckets":[{"provider":"api","model":"m\u0085x","quota_bucket":null}]}`, "control character"},
		{"bidi override", `{"buckets":[{"provider":"api","model":"m\u202ex","quota_bucket":null}]}`, "control character"},
		{"zero width", `{"buckets":[{"provider":"api","model":"m\u200bx","quota_bucket":null}]}`, "control character"},
		{"line separator", `{"buckets":[{"provider":"api","model":"m\u2028x","quota_bucket":null}]}`, "control character"},
		// U+2029 is neither Cc nor Cf, yet breaks a log line like U+2028.
		{"paragraph separator", `{"buckets":[{"provider":"api","model":"m\u2029x","quota_bucket":null}]}`, "control character"},
		{"lone surrogate", `{"buckets":[{"provider":"api","model":"m\ud800x","quota_bucket":null}]}`, "control character"},
		{"raw newline in string", "{\"buckets\":[{\"provider\":\"api\",\"model\":\"a\nb\",\"quota_bucket\":null}]}", "malformed JSON"},
		{"invalid UTF-8", "{\"buckets\":[{\"provider\":\"api\",\"model\":\"m\xff\",\"quota_bucket\":null}]}", "not valid UTF-8"},
		{"newlines between tokens", "{\n\t\"buckets\": [\r\n" + entry("api", "m", nil) + "\n]\n}", ""},
		{"non-ASCII name", buckets(entry("api", "modèle-é", nil)), ""},
	})
}

func TestPolicyRejectsUnknownFields(t *testing.T) {
	checkPolicy(t, []struct{ name, raw, want string }{
		{"entry", `{"buckets":[{"provider":"api","model":"m","quota_bucket":null,"seconds":60}]}`, "unknown field"},
		{"top", `{"buckets":[],"version":1}`, "unknown field"},
		{"empty key", `{"buckets":[{"":"x","provider":"api","model":"m","quota_bucket":null}]}`, "unknown field"},
	})
}

func TestPolicyErrorsNeverQuoteValues(t *testing.T) {
	const secret = "sk-canary-5eb63bbbe01eeed0"
	for _, raw := range []string{
		secret,
		`{"` + secret + `":1}`,
		buckets(`{"provider":"api","model":"m","quota_bucket":null,"` + secret + `":1}`),
		buckets(entry("api", secret+"*", nil)),
		buckets(entry("api", secret+"\u0000", nil)),
		buckets(entry("api", secret, nil), entry("api", secret, nil)),
		`{"buckets":[` + secret + `]}`,
	} {
		_, err := ParsePolicy(raw)
		if err == nil {
			t.Fatalf("ParsePolicy(%q) accepted", raw)
		}
		if strings.Contains(err.Error(), "sk-") || strings.Contains(err.Error(), "canary") {
			t.Errorf("ParsePolicy error quotes the input: %v", err)
		}
	}
}

func TestPolicyRoundTrip(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	want := []Scope{
		{Provider: "api", Model: str("decide-mini")},
		{Provider: "api", QuotaBucket: str("shared-decide")},
		{Provider: "zdr", Model: str("decide-large"), QuotaBucket: str("shared-decide")},
	}
	if got := p.Scopes(); !reflect.DeepEqual(got, want) {
		t.Errorf("Scopes() = %+v, want %+v", got, want)
	}
	enc, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	const canonical = `{"buckets":[{"provider":"api","model":"decide-mini","quota_bucket":null},{"provider":"api","model":null,"quota_bucket":"shared-decide"},{"provider":"zdr","model":"decide-large","quota_bucket":"shared-decide"}]}`
	if string(enc) != canonical {
		t.Errorf("MarshalJSON = %s, want %s", enc, canonical)
	}
	again := mustPolicy(t, string(enc))
	if !reflect.DeepEqual(again.Scopes(), want) {
		t.Errorf("re-parsed scopes = %+v, want %+v", again.Scopes(), want)
	}
	// Scopes returns copies.
	s := p.Scopes()
	*s[0].Model = "changed"
	if !p.Matches("api", "decide-mini", "") {
		t.Error("mutating Scopes() changed the policy")
	}
}
