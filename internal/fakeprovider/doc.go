// Package fakeprovider is a fake LLM provider that speaks the Decisions API
// as rotor assumes it (shared/DESIGN.md, "The provider's API") and the
// OpenAI routes rotor forwards (POST /v1/chat/completions, /v1/responses
// and /v1/embeddings, JSON and SSE, with usage in OpenAI's shapes, complete
// enough for the OpenAI SDKs): a real HTTP server on loopback that rotor's
// unit, end-to-end and adversarial tests, its
// benchmark, `rotor demo` and `rotor fake-provider` send requests to. Those
// two commands use a few of its functions; deadcode without -test lists the rest, on purpose: only
// tests use them (`deadcode -test ./...` is the check).
//
// The fake knows a set of API keys, each with its own model catalog. A
// request with an unknown or missing key gets 401 invalid_api_key. For a
// known key, the POST routes answer like a healthy provider (see OK) unless
// a behaviour was scripted for that key and upstream model:
//
//   - Script queues one-shot Steps, consumed in order;
//   - SetDefault sets a persistent Step used once the queue is empty;
//   - SetQuota adds a hidden rate limit (429 rate_limit_exceeded beyond N
//     successful answers per window);
//   - ScriptCatalog and SetCatalogDefault do the same for GET /v1/models.
//
// Every Step is a real provider behaviour: rate limits with and without
// Retry-After, permanent quota, 401/403/404/405/500/501, unstructured
// errors, connection resets, stalls, slow or oversized error bodies, answers
// larger than rotor's 64 MiB cap, redirects, error messages that echo the
// caller's key and body, and streams (Streamed) that are long, padded,
// interleaved with SSE comments, cut or stalled after N events. Everything
// the fake receives is recorded (Requests, Hits, WaitCanceled, OnRequest)
// so tests can check which credential was
// used, what was forwarded byte for byte, and whether a client's
// cancellation reached the provider.
//
// Usage, in a test:
//
//	fp, err := fakeprovider.Start(fakeprovider.Options{})
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(func() { fp.Close() })
//	fp.AddKey("sk-a", "decide-mini")
//	fp.AddKey("sk-b", "decide-mini", "decide-large")
//	fp.Script("sk-a", "decide-mini", fakeprovider.RateLimited("30"))
//	fp.SetDefault("sk-b", "decide-large", fakeprovider.NotFoundEndpoint())
//	// point rotor's credentials at fp.URL(), send requests, then:
//	if got := fp.HitsFor("sk-b", fakeprovider.PathDecisions); got != 1 {
//		t.Errorf("sk-b decisions = %d, want 1", got)
//	}
//
// The fake never logs a key, only its fingerprint (secret.Value.Fingerprint);
// Received.Key holds the raw key because tests must tell credentials apart.
//
// This is non-test code (rotor demo uses it): it must not import "testing"
// or net/http/httptest, and it imports no top-level rotor package.
package fakeprovider
