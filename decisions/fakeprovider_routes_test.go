package decisions

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/ledger"
)

// ids are the parts of a fake answer that differ between two calls.
var ids = regexp.MustCompile(`"(id|created|created_at)":("[^"]*"|\d+)`)

// TestFakeProviderChatStreamThroughRotor: against the fake provider, the
// chat stream a caller sees is the provider's stream without the usage
// chunk rotor asked for, and with it when the caller asked; the row holds
// the usage the fake reported.
func TestFakeProviderChatStreamThroughRotor(t *testing.T) {
	h := newHarness(t, opts{openAI: true, creds: []cred{{name: "team-a", pool: "api", key: keyA, models: []string{"gpt-test"}}}})
	for _, c := range []struct {
		name, body string
		keepUsage  bool
	}{
		{"rotor asked", `{"model":"api/gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`, false},
		{"caller asked", `{"model":"api/gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, true},
	} {
		resp := h.open(context.Background(), KindChat.Path, c.body)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		sent := h.fp.RequestsFor(keyA, KindChat.Path)
		forwarded := sent[len(sent)-1].Body
		// The provider's own stream for the body rotor forwarded.
		req, _ := http.NewRequest(http.MethodPost, h.fp.URL()+KindChat.Path, strings.NewReader(string(forwarded)))
		req.Header.Set("Authorization", "Bearer "+keyA)
		direct, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := io.ReadAll(direct.Body)
		direct.Body.Close()
		events := strings.SplitAfter(string(want), "\n\n")
		if !c.keepUsage {
			// The usage-only chunk is the one before data: [DONE].
			events = append(events[:len(events)-3], events[len(events)-2:]...)
		}
		if g, w := ids.ReplaceAllString(string(got), "$1"), ids.ReplaceAllString(strings.Join(events, ""), "$1"); g != w {
			t.Errorf("%s: caller saw\n%s\nwant\n%s", c.name, g, w)
		}
		u := fp.ExpectedRouteUsage(forwarded, fp.DefaultStreamEvents)
		row := h.row(resp.Header.Get("X-Request-ID"))
		if row.InputTokens != ledger.Known(u.Input) || row.OutputTokens != ledger.Known(u.Output) || row.CachedInputTokens != ledger.Known(u.Cached) ||
			row.ReasoningTokens != ledger.Known(u.Reasoning) || row.ErrorCode != "" {
			t.Errorf("%s: row %+v, want usage %+v", c.name, row, u)
		}
	}
}

// An answer over 64 MiB on an OpenAI route is 502 response_too_large (not
// the Decisions name), never retried, with a row of unknown tokens.
func TestFakeProviderChatAnswerOver64MiB(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 64 MiB")
	}
	h := newHarness(t, opts{openAI: true, creds: []cred{{name: "team-a", pool: "api", key: keyA, models: []string{"gpt-test"}}}})
	h.fp.Script(keyA, "", fp.HugeAnswer(MaxBody+1))
	r := h.do(context.Background(), KindChat.Path, `{"model":"api/gpt-test","messages":[]}`)
	wantStatus(t, r, 502, "response_too_large")
	if r.header.Get("x-should-retry") != "false" {
		t.Error("502 too large without x-should-retry: false")
	}
	if row := h.row(r.header.Get("X-Request-ID")); row.Status != 502 || row.InputTokens.Known || row.TotalTokens.Known || row.Operation != "chat.completions" {
		t.Errorf("row %+v, want 502 with unknown tokens", row)
	}
}
