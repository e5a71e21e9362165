package decisions

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/ledger"
)

// specRules maps every rule of shared/spec/decisions-api.md, in the spec's
// order, to the tests that cover it. Rules held by another package name it
// as owner, with the test names there in the rule's note.
// TestSpecRuleMapIsComplete checks that every named test exists here.
var specRules = []struct {
	rule  string
	tests []string
	owner string
}{
	{"The runtime accepts POST /v1/decisions and POST /decisions.", []string{"TestBothRoutesForwardToRegionalDecisionsEndpoint"}, "runtime"},
	{"The authenticated local bridge also forwards /v1/decisions to the runtime.", nil, "bridge, cmd/rotor: TestBridgeToStandaloneRuntimeAnswersLikeInProcess"},
	{"Requests go to the selected credential's regional /v1/decisions endpoint; never translated.", []string{"TestBothRoutesForwardToRegionalDecisionsEndpoint", "TestRequestStaysInItsRegion"}, ""},
	{"Select api/<model> or zdr/<model> explicitly.", []string{"TestBareModelsRejectedBeforeDiscoveryOrInference", "TestZDRSelectionUsesOnlyZDRCredentials"}, ""},
	{"Bare subscription models, PSP routes, and speed-tier aliases are rejected before discovery or inference.", []string{"TestBareModelsRejectedBeforeDiscoveryOrInference"}, ""},
	{"A zdr/ selection uses only operator-declared ZDR credentials.", []string{"TestZDRSelectionUsesOnlyZDRCredentials"}, ""},
	{"Eligibility: the route is enabled and belongs to the explicitly selected API/ZDR pool.", []string{"TestZDRSelectionUsesOnlyZDRCredentials", "TestRequestStaysInItsRegion"}, ""},
	{"Eligibility: its discovered catalog includes the model, and its visibility policy allows it.", []string{"TestEligibilityRequiresCatalogVisibilityAndProfile"}, ""},
	{"Eligibility: the model's operator profile includes supported_endpoints: [\"/v1/decisions\"].", []string{"TestEligibilityRequiresCatalogVisibilityAndProfile"}, ""},
	{"A model ID returned by /models alone does not grant endpoint capability.", []string{"TestEligibilityRequiresCatalogVisibilityAndProfile"}, ""},
	{"This change neither edits existing profiles nor performs inference probes.", []string{"TestNoInferenceProbes"}, ""},
	{"Credentials whose catalog is already fresh are tried first; a cold or stalled catalog never delays them.", []string{"TestWarmCredentialsServedWhileAnotherCatalogStalls"}, ""},
	{"Others in the same pool and region are discovered only after the warm ones fail or are rate limited.", []string{"TestColdCredentialsDiscoveredOnlyAfterWarmOnesFailOrAreRateLimited"}, ""},
	{"When no catalog is fresh, the whole pool is discovered before the first send.", []string{"TestNoFreshCatalogDiscoversWholePoolBeforeFirstSend"}, ""},
	{"Predicate, choice (boolean choices too) and score questions are forwarded with the original input and optional cache/safety fields.", []string{"TestQuestionTypesForwardedIntact", "TestForwardedBodyEqualsCallerBodyApartFromModel"}, ""},
	{"Only the routing prefix is removed from model. No Responses-only settings are injected.", []string{"TestForwardedBodyEqualsCallerBodyApartFromModel"}, ""},
	{"Native answers, refusals, and usage remain intact.", []string{"TestAnswersRefusalsAndUsageReturnedIntact"}, ""},
	{"Provider rejection status and safe code/type/param are preserved; messages are sanitized.", []string{"TestProviderRejectionKeepsStatusAndSafeFieldsSanitizesMessage", "TestCanaryKeyNeverLeaks"}, ""},
	{"Unsupported endpoint responses (405, 501, 404 naming the model or endpoint or unstructured) allow another eligible credential and are cached five minutes per credential, model and endpoint.", []string{"TestUnsupportedEndpointFailsOverAndIsCachedFiveMinutes"}, ""},
	{"A 404 about request content is returned without failover or caching.", []string{"TestNotFoundAboutContentReturnedWithoutFailoverOrCache"}, ""},
	{"401, 403 or permanent-quota 429: the next eligible credential is tried; the rejected one is not sent again for that request.", []string{"TestRejectedCredentialTriesNextAndIsNotSentAgain"}, ""},
	{"Every credential rejected with 401 or 403 gives 503 decisions_pool_unavailable, never 401/403.", []string{"TestEveryCredentialRejectedAuthGives503PoolUnavailable"}, ""},
	{"A pool-wide permanent quota rejection stays a sanitized 429.", []string{"TestPoolWidePermanentQuotaIsSanitized429"}, ""},
	{"Confirmed temporary rate_limit_exceeded 429s use Retry-After and shared backoff.", []string{"TestTemporaryRateLimitUsesRetryAfterAndSharedBackoff", "TestParallelRequestsShareOneCooldown"}, ""},
	{"A cooldown outlasting the deadline gives 429 with Retry-After and retry_after_ms set to it, also when cached by an earlier request.", []string{"TestCooldownOutlastingDeadlineGives429WithThatCooldown"}, ""},
	{"(DESIGN) The route waits for the earliest release inside the remaining deadline.", []string{"TestWaitsForEarliestReleaseInsideDeadline"}, ""},
	{"Unclassified 429 rejections, network ambiguity, and other server errors are not replayed.", []string{"TestAmbiguousFailuresAreNotReplayed", "TestProviderRedirectIsNotFollowed"}, ""},
	{"Discovery, admission, body reads and retries share a 60-second deadline and respect cancellation.", []string{"TestDeadlineSharedAndProviderThatNeverAnswersIsNotReplayed", "TestClientDisconnectCancelsUpstreamAndRowIsCommitted"}, ""},
	{"Answers are buffered up to 64 MiB; a larger one is 502 decisions_response_too_large with no token counts.", []string{"TestAnswerOver64MiBGives502AndNullTokens", "TestRequestOver64MiBIs413BeforeAnything"}, ""},
	{"Error bodies are read until 5 s without data or 64 KiB.", []string{"TestStalledErrorBodyReleasesFailover", "TestErrorBodyReadStopsAt64KiB"}, ""},
	{"The ledger records the decisions operation and actual token counts, also for answers larger than a stream scanner's cap.", []string{"TestLedgerRecordsDecisionsOperationRealTokensAndUnknownCost", "TestUsageRecordedForLargeAnswers"}, ""},
	{"The full provider usage object is returned to the caller.", []string{"TestAnswersRefusalsAndUsageReturnedIntact"}, ""},
	{"Estimated cost remains unknown (null), never zero.", []string{"TestLedgerRecordsDecisionsOperationRealTokensAndUnknownCost"}, "cmd/rotor: TestLedgerReportFormats"},
	{"Every budget window counts all ledger rows, whatever the budget's key.", nil, "budgets: TestRequestsBudgetExhaustedFreesWhenOldestRowLeaves"},
	{"A cost budget whose window holds unknown cost fails closed until the window ends.", nil, "budgets: TestCostBudgetWithUnknownCostRowFailsClosedUntilItLeaves, TestCostSumNeverReadsNullAsZero"},
	{"While any --cost budget exists, Decisions requests get 403 policy_blocked before discovery or inference, naming the cost budgets.", []string{"TestCostBudgetRefusesBeforeDiscovery"}, "budgets: TestAnyCostBudgetBlocksDecisionsNamingIt"},
	{"Budget on --requests or --tokens to allow Decisions.", []string{"TestRequestsBudgetUsedUpGives429WithRetryAfter"}, "budgets: TestTokensBudgetSkipsUnknownAndStopsAtLimit"},
	{"Usage recorded before a cost budget was created still makes it fail closed.", nil, "budgets: TestCostBudgetWithUnknownCostRowFailsClosedUntilItLeaves"},
}

func TestSpecRuleMapIsComplete(t *testing.T) {
	tests := map[string]bool{}
	fset := token.NewFileSet()
	files, _ := filepath.Glob("*_test.go")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") {
				tests[fd.Name.Name] = true
			}
		}
	}
	for _, r := range specRules {
		if len(r.tests) == 0 && r.owner == "" {
			t.Errorf("rule %q has neither a test nor an owner", r.rule)
		}
		for _, name := range r.tests {
			if !tests[name] {
				t.Errorf("rule %q names %s, which does not exist", r.rule, name)
			}
		}
	}
}

// Spec: "This change neither edits existing profiles nor performs inference
// probes": the only decisions the provider sees are the callers'.
func TestNoInferenceProbes(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.ScriptCatalog(h.keys["team-b"], fp.Unauthorized())
	for i := 0; i < 3; i++ {
		h.post(decision("api/decide-mini"))
	}
	h.clk.Advance(h.router.cfg.CatalogTTL + 1)
	h.post(decision("api/decide-mini"))
	if n := h.fp.Hits(fp.PathDecisions); n != 4 {
		t.Errorf("%d decisions reached the provider for 4 caller requests", n)
	}
}

// Spec: "Typed predicate, choice (including boolean choices), and score
// questions are forwarded with the original input and optional
// cache/safety fields."
func TestQuestionTypesForwardedIntact(t *testing.T) {
	h := newHarness(t, opts{})
	for _, q := range []string{
		`{"type":"predicate"}`,
		`{"type":"choice","choices":["refund","replace","reject"]}`,
		`{"type":"choice","choices":[true,false]}`,
		`{"type":"score","min":0,"max":10}`,
	} {
		body := `{"model":"api/decide-mini","input":{"text":"order 77","lang":"en"},"question":` + q + `,"cache":{"ttl":"1h"},"safety":{"mode":"strict"}}`
		r := h.post(body)
		wantStatus(t, r, 200, "")
		recs := h.fp.RequestsFor(h.keys["team-a"], fp.PathDecisions)
		got := recs[len(recs)-1].Body
		if want := strings.Replace(body, "api/decide-mini", "decide-mini", 1); string(got) != want {
			t.Errorf("forwarded %s, want %s", got, want)
		}
		var ans struct {
			Output map[string]any `json:"output"`
		}
		if err := json.Unmarshal(r.body, &ans); err != nil || ans.Output == nil {
			t.Errorf("answer to %s: %s", q, r.body)
		}
	}
}

// Spec: "The usage ledger records ... actual provider token counts,
// including for responses larger than the generic stream scanner's cap."
// The usage object of this 8 MiB answer comes after the padding.
func TestUsageRecordedForLargeAnswers(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.Script(h.keys["team-a"], "", fp.HugeAnswer(8<<20))
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 200, "")
	if len(r.body) != 8<<20 {
		t.Errorf("answer is %d bytes, want 8 MiB intact", len(r.body))
	}
	rows := h.rows()
	if len(rows) != 1 || !rows[0].TotalTokens.Known || rows[0].TotalTokens == (ledger.Count{}) {
		t.Fatalf("rows = %+v, want the provider's token counts", rows)
	}
	u := readUsage(r.body)
	if u.Total == nil || rows[0].TotalTokens.V != *u.Total {
		t.Errorf("row tokens %v, answer usage %v", rows[0].TotalTokens, u.Total)
	}
}
