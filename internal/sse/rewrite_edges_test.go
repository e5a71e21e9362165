package sse

import (
	"strings"
	"testing"
)

// The usage-only chunk is recognised however valid JSON spells it: tabs,
// newlines (a chunk sent as several data lines is joined by "\n") and
// escaped quotes in its strings. Missed, the chunk rotor injected reaches
// the caller and the row loses its usage.
func TestChatRewriterReadsAnyJSONSpelling(t *testing.T) {
	const usage = `{"total_tokens":1}`
	for _, tt := range []struct{ name, in string }{
		{"tabs", "data: {\"choices\":[],\t\"usage\":\t" + usage + "}\n\n"},
		{"several data lines", "data: {\"choices\":[],\ndata: \"usage\":\ndata: " + usage + "}\n\n"},
		{"escaped quotes and braces in a string", `data: {"id":"chatcmpl-\"}],\\","choices":[],"usage":` + usage + "}\n\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, got, _ := rewrite(t, tt.in+done, true)
			if out != done || got != usage {
				t.Errorf("caller sees %q, Usage() = %s; want only %q and %s", out, got, done, usage)
			}
		})
	}
}

// Usage stays what the provider reported after later events: the scanner
// reuses its buffer for each event, so a usage kept in place would be
// overwritten by the next chunk as long (a server that puts the usage on
// a content chunk may send more).
func TestChatRewriterUsageSurvivesLaterEvents(t *testing.T) {
	const usage = `{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}`
	long := `data: {"choices":[{"index":0,"delta":{"content":"` + strings.Repeat("word ", 100) + `"}}],"usage":null}` + "\n\n"
	in := long + `data: {"choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":` + usage + "}\n\n" + long + done
	if _, got, _ := rewrite(t, in, true); got != usage {
		t.Errorf("Usage() after a later chunk = %s, want %s", got, usage)
	}
}
