package decisions

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/jsonobj"
	"github.com/rotorhq/rotor/internal/spectest"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/ledger"
)

// specRules maps every rule of shared/spec/decisions-api.md, in the spec's
// order, to the tests that cover it. Rules held by another package name it
// as owner, with the test names there in the rule's note.
// TestSpecRuleMapIsComplete checks that every named test exists here.
var specRules = []spectest.Rule{
	spectest.R("The runtime accepts POST /v1/decisions and POST /decisions.", []string{"TestBothRoutesForwardToRegionalDecisionsEndpoint"}, "gateway: TestRuntimeServesBothDecisionsPaths"),
	spectest.R("(DESIGN) Another method on /v1/decisions answers 405 method_not_allowed with Allow: POST, on runtime and bridge.", []string{"TestMethodOtherThanPost"}, "gateway: TestNonPostOnDecisionsIs405WithAllow; bridge: TestNonPostOnDecisionsIs405WithAllow"),
	spectest.R("The authenticated local bridge also forwards /v1/decisions to the runtime.", nil, "bridge: TestForwardStripsIdentityHeadersAndSetsLabel, TestStandaloneRuntimeGetsRuntimeToken; e2e: TestBridgeToStandaloneRuntimeAnswersLikeInProcess"),
	spectest.R("Requests go to the selected credential's regional /v1/decisions endpoint; never translated.", []string{"TestBothRoutesForwardToRegionalDecisionsEndpoint", "TestRequestStaysInItsRegion", "TestRegionHoldsWithAWarmForeignCatalog"}, ""),
	spectest.R("Select api/<model> or zdr/<model> explicitly.", []string{"TestBareModelsRejectedBeforeDiscoveryOrInference", "TestZDRSelectionUsesOnlyZDRCredentials"}, ""),
	spectest.R("Bare subscription models, PSP routes, and speed-tier aliases are rejected before discovery or inference.", []string{"TestBareModelsRejectedBeforeDiscoveryOrInference"}, ""),
	spectest.R("A zdr/ selection uses only operator-declared ZDR credentials.", []string{"TestZDRSelectionUsesOnlyZDRCredentials"}, ""),
	spectest.R("Eligibility: the route is enabled and belongs to the explicitly selected API/ZDR pool.", []string{"TestZDRSelectionUsesOnlyZDRCredentials", "TestRequestStaysInItsRegion"}, ""),
	spectest.R("Eligibility: its discovered catalog includes the model, and its visibility policy allows it.", []string{"TestEligibilityRequiresCatalogVisibilityAndProfile", "TestCatalogMustListTheModel", "TestCatalogGoingStaleDuringACooldownWaitKeepsTheCredential"}, ""),
	spectest.R("Eligibility: the model's operator profile includes supported_endpoints: [\"/v1/decisions\"].", []string{"TestEligibilityRequiresCatalogVisibilityAndProfile"}, ""),
	spectest.R("A model ID returned by /models alone does not grant endpoint capability.", []string{"TestEligibilityRequiresCatalogVisibilityAndProfile"}, ""),
	spectest.R("This change neither edits existing profiles nor performs inference probes.", []string{"TestNoInferenceProbes"}, ""),
	spectest.R("Credentials whose catalog is already fresh are tried first; a cold or stalled catalog never delays them.", []string{"TestWarmCredentialsServedWhileAnotherCatalogStalls"}, ""),
	spectest.R("Others in the same pool and region are discovered only after the warm ones fail or are rate limited.", []string{"TestColdCredentialsDiscoveredOnlyAfterWarmOnesFailOrAreRateLimited"}, ""),
	spectest.R("When no catalog is fresh, the whole pool is discovered before the first send.", []string{"TestNoFreshCatalogDiscoversWholePoolBeforeFirstSend", "TestStalledCatalogIsGivenUpAtTheCatalogTimeout"}, ""),
	spectest.R("Predicate, choice (boolean choices too) and score questions are forwarded with the original input and optional cache/safety fields.", []string{"TestQuestionTypesForwardedIntact", "TestForwardedBodyEqualsCallerBodyApartFromModel"}, ""),
	spectest.R("Only the routing prefix is removed from model. No Responses-only settings are injected.", []string{"TestForwardedBodyEqualsCallerBodyApartFromModel"}, ""),
	spectest.R("Native answers, refusals, and usage remain intact.", []string{"TestAnswersRefusalsAndUsageReturnedIntact"}, ""),
	spectest.R("Provider rejection status and safe code/type/param are preserved; messages are sanitized.", []string{"TestProviderRejectionKeepsStatusAndSafeFieldsSanitizesMessage", "TestProviderRejectionKeepsParam", "TestCanaryKeyNeverLeaks", "TestProviderErrorFieldsNeverCarryTheKey", "TestProviderRejectionWithoutATypeGetsRotorsType"}, ""),
	spectest.R("Unsupported endpoint responses (405, 501, 404 naming the model or endpoint or unstructured) allow another eligible credential and are cached five minutes per credential, model and endpoint.", []string{"TestUnsupportedEndpointFailsOverAndIsCachedFiveMinutes", "TestNotFoundClassifiedByStructuredErrorFirst", "TestDefaultLimitsAreTheSpecs", "TestUnsupportedCachedPerEndpoint"}, ""),
	spectest.R("A 404 about request content is returned without failover or caching.", []string{"TestNotFoundAboutContentReturnedWithoutFailoverOrCache", "TestNotFoundClassifiedByStructuredErrorFirst"}, ""),
	spectest.R("(DESIGN) A 404 is classified by its structured error first (code, then param), and only then by its message.", []string{"TestNotFoundClassifiedByStructuredErrorFirst"}, ""),
	spectest.R("401, 403 or permanent-quota 429: the next eligible credential is tried; the rejected one is not sent again for that request.", []string{"TestRejectedCredentialTriesNextAndIsNotSentAgain", "TestPermanentQuotaNotSentAgainAfterAWait", "TestPermanentQuotaSimilarCodesFailOver", "TestClassifyUpstreamAnswer"}, ""),
	spectest.R("Every credential rejected with 401 or 403 gives 503 decisions_pool_unavailable, never 401/403.", []string{"TestEveryCredentialRejectedAuthGives503PoolUnavailable", "TestPoolUnavailableOnlyWhenEveryCredentialRejected"}, ""),
	spectest.R("(DESIGN) Unsupported answers count neither way; a temporary 429 gives the 429; an unclassified error passes through; a failed catalog or an unreachable provider is not a rejection.", []string{"TestPoolUnavailableOnlyWhenEveryCredentialRejected", "TestAuthRejectionBesideAnUnreachableProviderIsNot503"}, ""),
	spectest.R("A pool-wide permanent quota rejection stays a sanitized 429.", []string{"TestPoolWidePermanentQuotaIsSanitized429", "TestEveryCredentialRejectedAuthGives503PoolUnavailable"}, ""),
	spectest.R("Confirmed temporary rate_limit_exceeded 429s use Retry-After and shared backoff.", []string{"TestTemporaryRateLimitUsesRetryAfterAndSharedBackoff", "TestParallelRequestsShareOneCooldown", "TestClassifyUpstreamAnswer"}, ""),
	spectest.R("(DESIGN) One request takes at most 3 temporary 429s from one credential, then answers 429 with the cooldown: a handful of calls, never a storm.", []string{"TestRepeatedRateLimitsEndIn429NotAStorm", "TestCappedCredentialWhoseRestEndedAdvisesTheLeastWait"}, ""),
	spectest.R("A cooldown outlasting the deadline gives 429 with Retry-After and retry_after_ms set to it, also when cached by an earlier request.", []string{"TestCooldownOutlastingDeadlineGives429WithThatCooldown", "TestCooldownOutlastingTheContextDeadlineGives429"}, ""),
	spectest.R("(DESIGN) The route waits for the earliest release inside the remaining deadline.", []string{"TestWaitsForEarliestReleaseInsideDeadline", "TestFirstKeyFallbackRetryStormEndsIn429"}, ""),
	spectest.R("(DESIGN) first_key_fallback offers the first key once per request, only if not sent to yet; then the pool is all resting (a handful of calls, never a loop).", []string{"TestFirstKeyFallbackRetryStormEndsIn429"}, "pool: TestDisabledKeepsLegacyFirstKeyFallback"),
	spectest.R("(DESIGN) A 503 cooldown store full is answered 503 model_cooldown_capacity with Retry-After.", []string{"TestCooldownStoreFullGives503ModelCooldownCapacity"}, ""),
	spectest.R("Unclassified 429 rejections, network ambiguity, and other server errors are not replayed.", []string{"TestAmbiguousFailuresAreNotReplayed", "TestProviderRedirectIsNotFollowed"}, ""),
	spectest.R("Discovery, admission, body reads and retries share a 60-second deadline and respect cancellation.", []string{"TestDefaultLimitsAreTheSpecs", "TestDeadlineSharedAndProviderThatNeverAnswersIsNotReplayed", "TestClientDisconnectCancelsUpstreamAndRowIsCommitted", "TestErrorBodyStalledPastTheDeadlineIs504", "TestCatalogWaitEndsAtTheRequestDeadline"}, ""),
	spectest.R("Answers are buffered up to 64 MiB; a larger one is 502 decisions_response_too_large with no token counts.", []string{"TestAnswerOver64MiBGives502AndNullTokens"}, ""),
	spectest.R("64 MiB is the proxy's request cap; an announced larger body is refused at once (DESIGN: 413 before any body byte, never 100 Continue).", []string{"TestRequestOver64MiBIs413BeforeAnything", "TestOversizedContentLengthRefusedAtOnce", "TestAnnouncedOversizedBodyRefusedWithoutBuffering", "TestBodyCutByTheServersCapIs413"}, "bridge: TestOversizedContentLengthRefusedAtOnce"),
	spectest.R("Error bodies are read until 5 s without data or 64 KiB.", []string{"TestDefaultLimitsAreTheSpecs", "TestStalledErrorBodyReleasesFailover", "TestErrorBodyIdleLimitResetsOnData", "TestErrorBodyReadStopsAt64KiB", "TestErrorBodyThatNeverStartsReleasesFailover"}, ""),
	spectest.R("(DESIGN) x-should-retry: false on a 502, 503 or 504 after a provider call may have run, and on 503 no_credentials.", []string{"TestNoRetryHintAfterAProviderCallMayHaveRun"}, ""),
	spectest.R("The ledger records the decisions operation and actual token counts, also for answers larger than a stream scanner's cap.", []string{"TestLedgerRecordsDecisionsOperationRealTokensAndUnknownCost", "TestUsageRecordedForLargeAnswers"}, ""),
	spectest.R("The full provider usage object is returned to the caller.", []string{"TestAnswersRefusalsAndUsageReturnedIntact"}, ""),
	spectest.R("Estimated cost remains unknown (null), never zero.", []string{"TestLedgerRecordsDecisionsOperationRealTokensAndUnknownCost"}, "e2e: TestLedgerReportFormats"),
	spectest.R("Every budget window counts all ledger rows, whatever the budget's key.", nil, "budgets: TestRequestsBudgetExhaustedFreesWhenOldestRowLeaves, TestClockSteppedBackStillCountsTheDaysRows, TestTwoProcessesWithSkewedClocksNeverExceedARequestsBudget; ledger: TestRollupWindowsMatchRawRows, TestHourRollupWrittenAnHourBehind, TestFoldCountsEveryRowOnce"),
	spectest.R("A cost budget whose window holds unknown cost fails closed until the window ends.", nil, "budgets: TestCostBudgetWithUnknownCostRowFailsClosedUntilItLeaves, TestCostSumNeverReadsNullAsZero, TestFailClosedWinsOverExceededAndNamesEveryBudget, TestCostBudgetUsedUpAndFailingClosedFreesAtTheLater; ledger/conformance: AdmissionTakesAReservationOlderThanMaxInFlightForUnknownCost"),
	spectest.R("While any --cost budget exists, Decisions requests get 403 policy_blocked before discovery or inference, naming the cost budgets.", []string{"TestCostBudgetRefusesBeforeDiscovery"}, "budgets: TestAnyCostBudgetBlocksDecisionsNamingIt"),
	spectest.R("Budget on --requests or --tokens to allow Decisions.", []string{"TestRequestsBudgetUsedUpGives429WithRetryAfter"}, "budgets: TestTokensBudgetSkipsUnknownAndStopsAtLimit"),
	spectest.R("Usage recorded before a cost budget was created still makes it fail closed.", nil, "budgets: TestCostBudgetWithUnknownCostRowFailsClosedUntilItLeaves"),
}

func TestSpecRuleMapIsComplete(t *testing.T) { spectest.Check(t, specRules) }

// Spec: "Discovery, admission, response-body reads, and retries share a
// 60-second deadline", "Error bodies are read only until 5 seconds pass
// without data or 64 KiB arrive", "Answers are buffered up to 64 MiB, the
// proxy's request cap": the defaults a Route gets are the spec's figures
// (the tests that exercise them use shorter settings).
func TestDefaultLimitsAreTheSpecs(t *testing.T) {
	cfg := New(Config{}).cfg
	if cfg.Deadline != 60*time.Second || cfg.ErrorBodyIdle != 5*time.Second {
		t.Errorf("deadline %v, error body idle %v; want 60s and 5s", cfg.Deadline, cfg.ErrorBodyIdle)
	}
	if MaxErrorBody != 64<<10 || MaxBody != 64<<20 {
		t.Errorf("MaxErrorBody %d, MaxBody %d; want 64 KiB and 64 MiB", MaxErrorBody, MaxBody)
	}
	if UnsupportedTTL != 5*time.Minute { // "cached for five minutes"
		t.Errorf("UnsupportedTTL %v, want 5m", UnsupportedTTL)
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
	u := jsonobj.ReadUsage(r.body)
	if u.Total == nil || rows[0].TotalTokens.V != *u.Total {
		t.Errorf("row tokens %v, answer usage %v", rows[0].TotalTokens, u.Total)
	}
}
