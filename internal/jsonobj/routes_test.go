package jsonobj

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// usageString prints a Usage with unknown counts as "-", for comparisons.
func usageString(u Usage) string {
	f := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("in=%s out=%s total=%s cached=%s reasoning=%s", f(u.Input), f(u.Output), f(u.Total), f(u.Cached), f(u.Reasoning))
}

// Each route reads its own usage names: Responses' input/output tokens and
// their *_tokens_details, chat's prompt/completion tokens and theirs, and
// embeddings' prompt tokens with a known 0 output.
func TestRouteUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func([]byte) Usage
		body string
		want string
	}{
		{"responses", ReadResponsesUsage,
			`{"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":6,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":16}}`,
			"in=10 out=6 total=16 cached=4 reasoning=2"},
		{"responses ignores chat names", ReadResponsesUsage,
			`{"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens":6,"completion_tokens_details":{"reasoning_tokens":2}}}`,
			"in=- out=- total=- cached=- reasoning=-"},
		{"chat", ReadChatUsage,
			`{"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens":6,"completion_tokens_details":{"reasoning_tokens":2},"total_tokens":16}}`,
			"in=10 out=6 total=16 cached=4 reasoning=2"},
		{"chat ignores responses names", ReadChatUsage,
			`{"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":6,"output_tokens_details":{"reasoning_tokens":2}}}`,
			"in=- out=- total=- cached=- reasoning=-"},
		{"chat object", ChatUsageObject,
			`{"prompt_tokens":3,"completion_tokens":1}`,
			"in=3 out=1 total=4 cached=- reasoning=-"},
		{"responses object", ResponsesUsageObject,
			`{"input_tokens":3,"output_tokens":1,"output_tokens_details":{"reasoning_tokens":1}}`,
			"in=3 out=1 total=4 cached=- reasoning=1"},
		{"decisions has no details", ReadUsage,
			`{"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":6}}`,
			"in=10 out=6 total=16 cached=- reasoning=-"},
		{"embeddings", ReadEmbeddingsUsage,
			`{"object":"list","usage":{"prompt_tokens":8,"total_tokens":8}}`,
			"in=8 out=0 total=8 cached=- reasoning=-"},
		{"embeddings without a total", ReadEmbeddingsUsage,
			`{"usage":{"prompt_tokens":8}}`,
			"in=8 out=0 total=8 cached=- reasoning=-"},
		{"embeddings total below input", ReadEmbeddingsUsage,
			`{"usage":{"prompt_tokens":8,"total_tokens":0}}`,
			"in=8 out=0 total=8 cached=- reasoning=-"},
		{"embeddings output as sent", ReadEmbeddingsUsage,
			`{"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}`,
			"in=8 out=2 total=10 cached=- reasoning=-"},
		{"embeddings without usage", ReadEmbeddingsUsage,
			`{"object":"list"}`,
			"in=- out=- total=- cached=- reasoning=-"},
		// Member names match exactly, as encoding/json into a map does.
		{"usage in another case", ReadChatUsage,
			`{"Usage":{"prompt_tokens":3,"completion_tokens":1}}`,
			"in=- out=- total=- cached=- reasoning=-"},
		{"detail in another case", ReadChatUsage,
			`{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"Cached_Tokens":2},"completion_tokens":1}}`,
			"in=3 out=1 total=4 cached=- reasoning=-"},
		// The last of duplicate keys counts, even when it does not read.
		{"duplicate count, last unreadable", ReadUsage,
			`{"usage":{"input_tokens":3,"input_tokens":"x","output_tokens":1}}`,
			"in=- out=1 total=- cached=- reasoning=-"},
		// Counts up to 18 digits read; a 19-digit one could overflow.
		{"18 digits", ReadUsage,
			`{"usage":{"input_tokens":999999999999999999,"output_tokens":0}}`,
			"in=999999999999999999 out=0 total=999999999999999999 cached=- reasoning=-"},
		{"19 digits", ReadUsage,
			`{"usage":{"input_tokens":9999999999999999999,"output_tokens":0}}`,
			"in=- out=0 total=- cached=- reasoning=-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := usageString(tc.read([]byte(tc.body))); got != tc.want {
				t.Errorf("%s:\n got %s\nwant %s", tc.body, got, tc.want)
			}
		})
	}
}

// ParseRequest finds the model wherever it is, past nested values holding
// strings, and refuses a second "model" key or a case variant of it.
func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		body  string
		model string
		err   error
	}{
		{`{"model":"api/x"}`, "api/x", nil},
		{`{"messages":[{"role":"user","content":"hi"}],"model":"api/x"}`, "api/x", nil},
		{`{"input":["a","b"],"tools":{"t":["c"]},"model":"zdr/y","n":1}`, "zdr/y", nil},
		{`{"model":"api/x","model":"api/x"}`, "", ErrDuplicateModel},
		{`{"model":"api/x","model":"api/y"}`, "", ErrDuplicateModel},
		{`{"model":"api/x","MODEL":"api/y"}`, "", ErrDuplicateModel},
		{`{"Model":"api/x"}`, "", ErrDuplicateModel},
		{`{"input":"x"}`, "", ErrNoModel},
		{`{"model":7}`, "", ErrModelNotString},
		{`["model"]`, "", ErrBadJSON},
		{`{"model":"api/x"`, "", ErrBadJSON},
	} {
		r, err := ParseRequest([]byte(tc.body))
		if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) || r.Model != tc.model {
			t.Errorf("ParseRequest(%s) = %q, %v; want %q, %v", tc.body, r.Model, err, tc.model, tc.err)
		}
	}
}

// WithModel writes any upstream name as a JSON string, control bytes,
// DEL, quotes and non-ASCII included, and leaves every other byte alone.
func TestWithModelWritesValidJSON(t *testing.T) {
	body := `{"input":"x", "model" : "api/x" ,"n":[1]}`
	r, err := ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, up := range []string{"gpt-x", "a\x7fb", "a\x01b", "tab\there", `q"uote`, `back\slash`, "caf\u00e9", "line\u2028sep", "bad\xffutf8"} {
		out := r.WithModel(up)
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Errorf("WithModel(%q) = %s: not JSON: %v", up, out, err)
			continue
		}
		want := up
		if up == "bad\xffutf8" {
			want = "bad\ufffdutf8"
		}
		if got["model"] != want {
			t.Errorf("WithModel(%q) model = %q", up, got["model"])
		}
		var std map[string]any
		json.Unmarshal([]byte(body), &std)
		if fmt.Sprint(got["n"], got["input"]) != fmt.Sprint(std["n"], std["input"]) {
			t.Errorf("WithModel(%q) changed other members: %s", up, out)
		}
	}
	if out := string(r.WithModel("m")); out != `{"input":"x", "model" : "m" ,"n":[1]}` {
		t.Errorf("WithModel changed other bytes: %s", out)
	}
}
