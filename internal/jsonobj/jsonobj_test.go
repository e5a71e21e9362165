package jsonobj

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestReadUsage(t *testing.T) {
	tests := []struct {
		body           string
		in, out, total int64
		known          bool
	}{
		{`{"id":"x","usage":{"input_tokens":12,"output_tokens":3,"total_tokens":15,"extra":{"a":1}}}`, 12, 3, 15, true},
		{`{"usage":{"input_tokens":12,"output_tokens":3}}`, 12, 3, 15, true},
		{`{"output":{"usage":{"input_tokens":1}},"usage":{"input_tokens":2,"output_tokens":2,"total_tokens":4}}`, 2, 2, 4, true},
		{`{"usage":"none"}`, 0, 0, 0, false},
		{`{"no":"usage"}`, 0, 0, 0, false},
		{`{"usage":{"input_tokens":-1,"output_tokens":"x","total_tokens":1.5}}`, 0, 0, 0, false},
		// A total below its parts is the parts' sum: a total_tokens of 0
		// beside real counts would make tokens budgets count nothing.
		{`{"usage":{"input_tokens":12,"output_tokens":3,"total_tokens":0}}`, 12, 3, 15, true},
		{`{"usage":{"input_tokens":12,"output_tokens":3,"total_tokens":14}}`, 12, 3, 15, true},
		{`{"usage":{"input_tokens":12,"output_tokens":3,"total_tokens":-1}}`, 12, 3, 15, true},
		{`{"usage":{"input_tokens":12,"output_tokens":3,"total_tokens":20}}`, 12, 3, 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			u := ReadUsage([]byte(tt.body))
			if (u.Total != nil) != tt.known || (tt.known && (*u.Input != tt.in || *u.Output != tt.out || *u.Total != tt.total)) {
				t.Errorf("ReadUsage(%s) = %+v", tt.body, u)
			}
		})
	}
}

// FuzzParseRequest: the Decisions request check never panics; what it
// accepts is a JSON object whose model a standard decoder reads the same
// way, and rewriting the model changes nothing else.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"api/decide-mini","input":"x"}`,
		`{"input":"x","model":"zdr/m","question":{"type":"choice","choices":[true,false]}}`,
		`{"model":"api\/decide-mini"}`,
		`{"model":"api/d\u00e9cide"}`,
		`{"model":"api/x","model":"y"}`,
		`{"Model":"api/x"}`,
		` { "model" : "api/x" , "n" : [1,{"model":2}] } `,
		`{"model":7}`, `[]`, `{`, `{"a":"\"}"}`, `{"model":"api/x"}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseRequest(body)
		if err != nil {
			return
		}
		var std map[string]any
		if err := json.Unmarshal(body, &std); err != nil {
			t.Fatalf("accepted a body the standard decoder refuses: %v", err)
		}
		if std["model"] != req.Model {
			t.Fatalf("model %q, standard decoder reads %v", req.Model, std["model"])
		}
		out := req.WithModel("decide-mini")
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("rewritten body is not JSON: %v\n%s", err, out)
		}
		if got["model"] != "decide-mini" {
			t.Fatalf("rewritten model = %v", got["model"])
		}
		delete(got, "model")
		delete(std, "model")
		if !reflect.DeepEqual(got, std) {
			t.Fatalf("rewrite changed other fields:\n%v\n%v", std, got)
		}
	})
}

// FuzzReadUsage: reading usage from any answer never panics, and for a
// valid JSON answer it agrees with encoding/json.
func FuzzReadUsage(f *testing.F) {
	for _, s := range []string{
		`{"usage":{"input_tokens":12,"output_tokens":3,"total_tokens":15}}`,
		`{"usage":{"input_tokens":12,"output_tokens":3}}`,
		`{"usage":{"input_tokens":1,"input_tokens":2}}`,
		`{"usage":{"total_tokens":1e3}}`, `{"usage":[1]}`, `{"usage":{"Input_Tokens":4}}`,
		`{"usage":{"total_tokens":1},"usage":{"total_tokens":2}}`, `{"usage":{"input\u005ftokens":5}}`, `{"usage":`, `{"a":"\"usage\"","usage":{"total_tokens":7}}`, `not json`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		u := ReadUsage(body)
		// The oracle: encoding/json into maps, which match keys exactly
		// (struct fields would also match "Input_Tokens") and keep the
		// last of duplicate keys.
		var top map[string]json.RawMessage
		if json.Unmarshal(body, &top) != nil {
			return
		}
		var usage map[string]json.RawMessage
		if json.Unmarshal(top["usage"], &usage) != nil || usage == nil {
			return
		}
		count := func(key string) *int64 {
			raw, ok := usage[key]
			if !ok {
				return nil
			}
			v, ok := parseCount(bytes.TrimSpace(raw))
			if !ok {
				return nil
			}
			return &v
		}
		want := Usage{Input: count("input_tokens"), Output: count("output_tokens"), Total: count("total_tokens")}
		if want.Input != nil && want.Output != nil && (want.Total == nil || *want.Total < *want.Input+*want.Output) {
			tt := *want.Input + *want.Output
			want.Total = &tt
		}
		eq := func(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
		if !eq(u.Input, want.Input) || !eq(u.Output, want.Output) || !eq(u.Total, want.Total) {
			t.Fatalf("ReadUsage(%s) = %v/%v/%v, encoding/json reads %v/%v/%v", body, u.Input, u.Output, u.Total, want.Input, want.Output, want.Total)
		}
	})
}
