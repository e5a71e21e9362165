package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/rotorhq/rotor/internal/testutil/ledgertest"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
)

// sdkRow is what the test reads of one settled ledger row.
type sdkRow struct {
	requestID, operation, model, errorCode              string
	status                                              int
	input, output, total, cached, reasoning, costMicros sql.NullInt64
}

// newSDKRow returns the settled row written since the last call, failing
// the test unless there is exactly one.
func newSDKRow(t *testing.T, db *sql.DB, seen map[string]bool) sdkRow {
	t.Helper()
	rows, err := db.Query(`SELECT request_id, operation, model, error_code, status, input_tokens, output_tokens, total_tokens,
  cached_input_tokens, reasoning_tokens, cost_micros FROM usage WHERE state = 1 ORDER BY ts_ms, request_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var fresh []sdkRow
	for rows.Next() {
		var r sdkRow
		if err := rows.Scan(&r.requestID, &r.operation, &r.model, &r.errorCode, &r.status, &r.input, &r.output, &r.total,
			&r.cached, &r.reasoning, &r.costMicros); err != nil {
			t.Fatal(err)
		}
		if !seen[r.requestID] {
			seen[r.requestID] = true
			fresh = append(fresh, r)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(fresh) != 1 {
		t.Fatalf("%d new settled rows, want 1: %+v", len(fresh), fresh)
	}
	return fresh[0]
}

// sdkPrices are the test's prices in micro-USD per 1M tokens: input,
// cached input, output; what `pricing set` is given in USD.
var sdkPrices = map[string][3]int64{
	"gpt-4o-mini":            {150_000, 75_000, 600_000},
	"text-embedding-3-small": {20_000, 20_000, 0},
}

// wantCost is DESIGN's cost of a row: round half up of (uncached input x
// input price + cached x cached price + output x output price) / 10^6.
func wantCost(model string, in, cached, out int64) int64 {
	p := sdkPrices[model]
	return ((in-cached)*p[0] + cached*p[1] + out*p[2] + 500_000) / 1_000_000
}

// TestOpenAISDKThroughBridge: the official OpenAI Go SDK, pointed at the
// built binary's bridge (base URL .../v1/, the bridge token as API key),
// parses chat completions (non-streamed, streamed with and without
// stream_options.include_usage), a streamed Responses call, embeddings and
// the model list; every usage object it sees equals the ledger row's
// tokens, each row's cost follows the prices set, and a caller that did
// not ask for usage never sees the usage chunk rotor asked for.
func TestOpenAISDKThroughBridge(t *testing.T) {
	e := newE2E(t)
	prov := e.fakeProvider()
	const key = "sk-canary-sdk-2b7e151628aed2a6abf7158809cf4f3c"
	prov.AddKey(key, "gpt-4o-mini", "text-embedding-3-small")
	e.env = append(e.env, "E2E_KEY_SDK="+key)
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("runtime: {deadline: 10s}\npools:\n  api:\n    credentials:\n      - {name: team-sdk, region: us, base_url: %q, api_key_env: E2E_KEY_SDK}\n", prov.URL())
	if err := os.WriteFile(filepath.Join(e.home, "rotor.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.mustRun("pricing", "set", "gpt-4o-mini", "--input", "0.15", "--cached-input", "0.075", "--output", "0.6")
	e.mustRun("pricing", "set", "text-embedding-3-small", "--input", "0.02", "--output", "0")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	client := openai.NewClient(option.WithBaseURL(b.url+"/v1/"), option.WithAPIKey(e.token()), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := ledgertest.DB(t, e.db())
	seen := map[string]bool{}
	// upstream is the usage the fake reported for the last body it got on
	// path (rotor's forwarded body, with the usage option it may add).
	upstream := func(path string, outputTokens int) fp.RouteUsage {
		t.Helper()
		rs := prov.RequestsFor(key, path)
		if len(rs) == 0 {
			t.Fatalf("the fake got no request on %s", path)
		}
		return fp.ExpectedRouteUsage(rs[len(rs)-1].Body, outputTokens)
	}
	// checkRow compares a chat or Responses row with the usage the caller
	// saw (or, when it saw none, with the provider's).
	checkRow := func(t *testing.T, r sdkRow, op string, u fp.RouteUsage) {
		t.Helper()
		if r.operation != op || r.model != "gpt-4o-mini" || r.status != 200 || r.errorCode != "" {
			t.Errorf("row %+v, want %s gpt-4o-mini 200 and no error code", r, op)
		}
		if r.input.Int64 != u.Input || r.output.Int64 != u.Output || r.total.Int64 != u.Total ||
			r.cached.Int64 != u.Cached || r.reasoning.Int64 != u.Reasoning || !r.input.Valid || !r.cached.Valid || !r.reasoning.Valid {
			t.Errorf("row tokens in %v out %v total %v cached %v reasoning %v, the caller's usage %+v", r.input, r.output, r.total, r.cached, r.reasoning, u)
		}
		if want := wantCost("gpt-4o-mini", u.Input, u.Cached, u.Output); !r.costMicros.Valid || r.costMicros.Int64 != want {
			t.Errorf("row cost %v micro-USD, want %d", r.costMicros, want)
		}
	}
	messages := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")}

	t.Run("chat", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "api/gpt-4o-mini", Messages: messages})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].Message.Content != "Hello from the" || c.Model != "gpt-4o-mini" {
			t.Errorf("completion %+v", c)
		}
		u := fp.RouteUsage{Input: c.Usage.PromptTokens, Output: c.Usage.CompletionTokens, Total: c.Usage.TotalTokens,
			Cached: c.Usage.PromptTokensDetails.CachedTokens, Reasoning: c.Usage.CompletionTokensDetails.ReasoningTokens}
		if u != upstream(fp.PathChat, fp.OutputTokens) || u.Total == 0 {
			t.Errorf("SDK usage %+v, the fake's %+v", u, upstream(fp.PathChat, fp.OutputTokens))
		}
		checkRow(t, newSDKRow(t, db, seen), "chat.completions", u)
	})

	// chatStream streams a chat and returns the accumulated completion and
	// the chunks that carried a usage object.
	chatStream := func(t *testing.T, params openai.ChatCompletionNewParams) (openai.ChatCompletionAccumulator, []openai.ChatCompletionChunk) {
		t.Helper()
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		var withUsage []openai.ChatCompletionChunk
		for stream.Next() {
			ch := stream.Current()
			if !acc.AddChunk(ch) {
				t.Fatalf("the accumulator refused chunk %s", ch.RawJSON())
			}
			var raw struct {
				Usage json.RawMessage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(ch.RawJSON()), &raw); err != nil {
				t.Fatalf("chunk %s: %v", ch.RawJSON(), err)
			}
			if len(raw.Usage) > 0 && string(raw.Usage) != "null" {
				withUsage = append(withUsage, ch)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Hello from the" || acc.Choices[0].FinishReason != "stop" {
			t.Errorf("accumulated %+v", acc.ChatCompletion)
		}
		return acc, withUsage
	}

	t.Run("chat stream without include_usage", func(t *testing.T) {
		_, withUsage := chatStream(t, openai.ChatCompletionNewParams{Model: "api/gpt-4o-mini", Messages: messages})
		if len(withUsage) != 0 {
			t.Errorf("the caller did not ask for usage and got %d usage chunks: %s", len(withUsage), withUsage[0].RawJSON())
		}
		// rotor asked for usage upstream and recorded it.
		u := upstream(fp.PathChat, fp.DefaultStreamEvents)
		checkRow(t, newSDKRow(t, db, seen), "chat.completions", u)
	})

	t.Run("chat stream with include_usage", func(t *testing.T) {
		acc, withUsage := chatStream(t, openai.ChatCompletionNewParams{Model: "api/gpt-4o-mini", Messages: messages,
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
		if len(withUsage) != 1 || len(withUsage[0].Choices) != 0 {
			t.Errorf("the caller asked for usage and got %d usage chunks, want one final chunk with no choices", len(withUsage))
		}
		u := fp.RouteUsage{Input: acc.Usage.PromptTokens, Output: acc.Usage.CompletionTokens, Total: acc.Usage.TotalTokens,
			Cached: acc.Usage.PromptTokensDetails.CachedTokens, Reasoning: acc.Usage.CompletionTokensDetails.ReasoningTokens}
		if u.Total == 0 || u != upstream(fp.PathChat, fp.DefaultStreamEvents) {
			t.Errorf("SDK usage %+v, the fake's %+v", u, upstream(fp.PathChat, fp.DefaultStreamEvents))
		}
		checkRow(t, newSDKRow(t, db, seen), "chat.completions", u)
	})

	t.Run("responses stream", func(t *testing.T) {
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "api/gpt-4o-mini",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
		})
		var text string
		var done *responses.Response
		for stream.Next() {
			switch ev := stream.Current(); ev.Type {
			case "response.output_text.delta":
				text += ev.Delta
			case "response.completed":
				r := ev.AsResponseCompleted().Response
				done = &r
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if done == nil {
			t.Fatal("the stream ended without response.completed")
		}
		if text != "Hello from the" || done.OutputText() != text {
			t.Errorf("text %q, completed %q", text, done.OutputText())
		}
		u := fp.RouteUsage{Input: done.Usage.InputTokens, Output: done.Usage.OutputTokens, Total: done.Usage.TotalTokens,
			Cached: done.Usage.InputTokensDetails.CachedTokens, Reasoning: done.Usage.OutputTokensDetails.ReasoningTokens}
		if u.Total == 0 || u != upstream(fp.PathResponses, fp.DefaultStreamEvents) {
			t.Errorf("SDK usage %+v, the fake's %+v", u, upstream(fp.PathResponses, fp.DefaultStreamEvents))
		}
		checkRow(t, newSDKRow(t, db, seen), "responses", u)
	})

	t.Run("embeddings", func(t *testing.T) {
		emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "api/text-embedding-3-small",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"one", "two"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(emb.Data) != 2 || len(emb.Data[1].Embedding) != fp.EmbeddingDims {
			t.Errorf("embeddings %+v", emb.Data)
		}
		r := newSDKRow(t, db, seen)
		if r.operation != "embeddings" || r.model != "text-embedding-3-small" || r.status != 200 {
			t.Errorf("row %+v", r)
		}
		if emb.Usage.PromptTokens == 0 || r.input.Int64 != emb.Usage.PromptTokens || r.total.Int64 != emb.Usage.TotalTokens || !r.input.Valid {
			t.Errorf("row tokens in %v total %v, SDK usage %+v", r.input, r.total, emb.Usage)
		}
		// An embeddings answer has no output tokens: its priced row has a
		// known cost, or one embeddings call would make every cost budget
		// fail closed.
		if !r.output.Valid || r.output.Int64 != 0 {
			t.Errorf("row output tokens %v, want a known 0", r.output)
		}
		if want := wantCost("text-embedding-3-small", emb.Usage.PromptTokens, 0, 0); !r.costMicros.Valid || r.costMicros.Int64 != want {
			t.Errorf("row cost %v micro-USD (output tokens %v), want %d", r.costMicros, r.output, want)
		}
	})

	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, m := range page.Data {
			ids[m.ID] = true
			if m.Object != "model" || m.OwnedBy != "rotor" {
				t.Errorf("model %+v", m)
			}
		}
		if len(ids) != 2 || !ids["api/gpt-4o-mini"] || !ids["api/text-embedding-3-small"] {
			t.Errorf("models %v, want api/gpt-4o-mini and api/text-embedding-3-small", ids)
		}
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM usage`).Scan(&n); err != nil || n != len(seen) {
			t.Errorf("%d rows after listing models (%v), want %d: the list writes no row", n, err, len(seen))
		}
	})

	// A stream the provider cuts is an error in the SDK, not a clean end
	// without the terminal event (which the SDK, and code looping until
	// Next is false, took for success); the row says how it ended.
	t.Run("cut stream is an error", func(t *testing.T) {
		prov.Script(key, "gpt-4o-mini", fp.StreamCut(3))
		chat := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "api/gpt-4o-mini", Messages: messages})
		n := 0
		for chat.Next() {
			n++
		}
		if n == 0 || chat.Err() == nil {
			t.Errorf("chat stream cut after 3 events: %d chunks, Err() = %v; want some chunks, then an error", n, chat.Err())
		}
		if r := newSDKRow(t, db, seen); r.errorCode != "upstream_stream_cut" {
			t.Errorf("cut chat stream's row %+v, want upstream_stream_cut", r)
		}
		prov.Script(key, "gpt-4o-mini", fp.StreamCut(5))
		resp := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "api/gpt-4o-mini",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")}})
		n, completed := 0, false
		for resp.Next() {
			n++
			completed = completed || resp.Current().Type == "response.completed"
		}
		if n == 0 || completed || resp.Err() == nil {
			t.Errorf("Responses stream cut after 5 events: %d events, completed %v, Err() = %v; want some events, then an error", n, completed, resp.Err())
		}
		if r := newSDKRow(t, db, seen); r.errorCode != "upstream_stream_cut" {
			t.Errorf("cut Responses stream's row %+v, want upstream_stream_cut", r)
		}
	})
}

// Behind --runtime-url a cut stream reaches the caller as an error too,
// and the bridge's access line still says how it ended, with its tokens:
// the runtime ends its body to the bridge cleanly, its trailer marked
// aborted, and the bridge aborts its own answer.
func TestCutStreamThroughAStandaloneRuntime(t *testing.T) {
	e := newE2E(t)
	prov := e.fakeProvider()
	const key = "sk-canary-cut-2b7e151628aed2a6abf7158809cf4f3c"
	prov.AddKey(key, "gpt-4o-mini")
	e.env = append(e.env, "E2E_KEY_CUT="+key)
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("runtime: {deadline: 10s}\npools:\n  api:\n    credentials:\n      - {name: team-cut, region: us, base_url: %q, api_key_env: E2E_KEY_CUT}\n", prov.URL())
	if err := os.WriteFile(filepath.Join(e.home, "rotor.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := e.start("runtime", "start", "--listen", "127.0.0.1:0")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0", "--runtime-url", rt.url)
	client := openai.NewClient(option.WithBaseURL(b.url+"/v1/"), option.WithAPIKey(e.token()), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prov.Script(key, "gpt-4o-mini", fp.StreamCut(3))
	chat := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "api/gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	n := 0
	for chat.Next() {
		n++
	}
	if n == 0 || chat.Err() == nil {
		t.Errorf("cut stream through a standalone runtime: %d chunks, Err() = %v; want some chunks, then an error", n, chat.Err())
	}
	b.waitLog("code=upstream_stream_cut", 10*time.Second)
	for _, line := range strings.Split(b.stderr.String(), "\n") {
		if strings.Contains(line, "server=bridge") && strings.Contains(line, "code=upstream_stream_cut") && !strings.Contains(line, "total_tokens=") {
			t.Errorf("the bridge's access line lacks the tokens: %s", line)
		}
	}
}
