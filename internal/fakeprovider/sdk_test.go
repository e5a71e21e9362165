package fakeprovider_test

import (
	"context"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/rotorhq/rotor/internal/fakeprovider"
)

// TestOpenAISDKAgainstFake: the official OpenAI Go SDK, pointed at the fake,
// parses every route's answers, streamed or not, and sees OpenAI's usage
// fields: the fake counts as an OpenAI-compatible server.
func TestOpenAISDKAgainstFake(t *testing.T) {
	fp, err := fakeprovider.Start(fakeprovider.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fp.Close() })
	fp.AddKey("sk-sdk", "gpt-4o-mini", "text-embedding-3-small")
	client := openai.NewClient(option.WithBaseURL(fp.URL()+"/v1/"), option.WithAPIKey("sk-sdk"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := fakeprovider.ExpectedRouteUsage // of the body the SDK sent, read back from the fake
	lastBody := func(path string) []byte {
		t.Helper()
		rs := fp.RequestsFor("sk-sdk", path)
		if len(rs) == 0 {
			t.Fatalf("no request on %s", path)
		}
		return rs[len(rs)-1].Body
	}

	t.Run("chat", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "gpt-4o-mini",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
		})
		if err != nil {
			t.Fatal(err)
		}
		u := want(lastBody(fakeprovider.PathChat), fakeprovider.OutputTokens)
		if c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Content != "Hello from the" || c.Choices[0].FinishReason != "stop" {
			t.Errorf("completion = %+v", c)
		}
		if c.Usage.PromptTokens != u.Input || c.Usage.CompletionTokens != u.Output || c.Usage.TotalTokens != u.Total ||
			c.Usage.PromptTokensDetails.CachedTokens != u.Cached || c.Usage.CompletionTokensDetails.ReasoningTokens != u.Reasoning {
			t.Errorf("usage = %+v, want %+v", c.Usage, u)
		}
	})

	t.Run("chat stream", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:         "gpt-4o-mini",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			if !acc.AddChunk(stream.Current()) {
				t.Fatalf("the accumulator refused chunk %s", stream.Current().RawJSON())
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		u := want(lastBody(fakeprovider.PathChat), fakeprovider.DefaultStreamEvents)
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Hello from the" || acc.Choices[0].FinishReason != "stop" {
			t.Errorf("accumulated = %+v", acc.ChatCompletion)
		}
		if acc.Usage.PromptTokens != u.Input || acc.Usage.TotalTokens != u.Total || acc.Usage.PromptTokensDetails.CachedTokens != u.Cached {
			t.Errorf("usage = %+v, want %+v", acc.Usage, u)
		}
	})

	t.Run("responses", func(t *testing.T) {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "gpt-4o-mini",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
		})
		if err != nil {
			t.Fatal(err)
		}
		u := want(lastBody(fakeprovider.PathResponses), fakeprovider.OutputTokens)
		if r.Status != "completed" || r.OutputText() != "Hello from the" || r.Usage.InputTokens != u.Input ||
			r.Usage.OutputTokensDetails.ReasoningTokens != u.Reasoning || r.Usage.InputTokensDetails.CachedTokens != u.Cached {
			t.Errorf("response = %+v", r)
		}
	})

	t.Run("responses stream", func(t *testing.T) {
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "gpt-4o-mini",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
		})
		var text string
		var done *responses.Response
		for stream.Next() {
			ev := stream.Current()
			switch ev.Type {
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
		u := want(lastBody(fakeprovider.PathResponses), fakeprovider.DefaultStreamEvents)
		if text != "Hello from the" || done == nil || done.OutputText() != text || done.Usage.InputTokens != u.Input ||
			done.Usage.OutputTokens != u.Output || done.Usage.TotalTokens != u.Total {
			t.Errorf("text %q, completed %+v", text, done)
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		e, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "text-embedding-3-small",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"one", "two"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		u := want(lastBody(fakeprovider.PathEmbeddings), 0)
		if len(e.Data) != 2 || e.Data[1].Index != 1 || len(e.Data[1].Embedding) != fakeprovider.EmbeddingDims ||
			e.Data[1].Embedding[0] != float64(fakeprovider.EmbeddingValue(1, 0)) || e.Usage.PromptTokens != u.Input || e.Usage.TotalTokens != u.Input {
			t.Errorf("embeddings = %+v", e)
		}
	})

	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 2 || page.Data[0].ID != "gpt-4o-mini" || page.Data[0].Object != "model" {
			t.Errorf("models = %+v", page.Data)
		}
	})
}
