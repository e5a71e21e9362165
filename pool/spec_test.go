package pool

import (
	"testing"

	"github.com/rotorhq/rotor/internal/spectest"
)

// specRules maps every rule of shared/spec/model-cooldown.md, in the
// spec's order, to the tests in this package that cover it. A rule this
// package cannot hold (settings parsing, the runtime's registration of the
// adapter, the bridge's CORS) names its owner instead; shared/DESIGN.md
// ("Reading the spec in rotor's terms") says where NanoGPT-only rules do
// not apply. TestSpecRuleMapIsComplete keeps the table honest.
var specRules = []spectest.Rule{
	// Flag and paths.
	spectest.R("MODEL_COOLDOWN_ENABLED defaults to false.", []string{"TestModelCooldownDisabledByDefault"}, ""),
	spectest.R("Disabled pools keep their existing selection, cooldown, validation and response behavior,", []string{"TestDisabledKeepsLegacyBehaviour", "TestUnscopedCatalogKeepsLegacyRejectionRules"}, ""),
	spectest.R("including the legacy Codex Everywhere fallback to the first key when every key is resting.", []string{"TestDisabledKeepsLegacyFirstKeyFallback", "TestFirstKeyFallbackNeverOnScopedPath"}, ""),
	spectest.R("With the flag enabled, model scoping applies only where the request path supplies a model or an explicit quota bucket.", []string{"TestScopingAppliesOnlyWithModelOrBucket"}, ""),
	spectest.R("Paths without either keep the same provider-wide cooldown bookkeeping, selection and exceptions as the disabled path, including 429 and 401 handling.", []string{"TestUnscopedPathKeepsLegacyBookkeeping"}, ""),
	spectest.R("Enable/disable, empty values, whitespace, malformed settings logged once without the value.", nil, "config: TestModelCooldownSettings"),
	spectest.R("The maximum must be an integer from 1 through 2147483647 (an empty maximum uses 3600).", []string{"TestAdviceCappedAtMax"}, "config: TestModelCooldownSettings"),

	// Evidence and scope.
	spectest.R("The pool methods accept model, quota_bucket, outcome, credential_wide_auth and retry_after_seconds inputs.", []string{"TestSuppliedClassificationOverridesStatus", "TestUnauthorizedWithFlagFalseCreatesNoCooldown", "TestAdviceIsRelativeToObservationTime"}, ""),
	spectest.R("Selection and observation must receive the same provider, model and quota bucket.", []string{"TestQuotaBucketSharedByMemberModels"}, "decisions: TestRouteScopesCooldownsByUpstreamModelAndBucket"),
	spectest.R("Use the actual upstream model, without changing an explicit model selection.", nil, "decisions: TestRouteScopesCooldownsByUpstreamModelAndBucket, TestForwardedBodyEqualsCallerBodyApartFromModel"),
	spectest.R("A quota bucket is an explicit provider configuration shared by its member models;", []string{"TestQuotaBucketSharedByMemberModels"}, ""),
	spectest.R("never infer it from a response body, an arbitrary caller field or a model prefix.", []string{"TestQuotaBucketNeverInferred"}, ""),
	spectest.R("Model names and quota bucket names occupy distinct namespaces.", []string{"TestModelAndBucketNamespacesDistinct", "TestCredentialIDsAreSaltedPoolNamespacedHMACs"}, ""),
	spectest.R("A throttled credential outcome cools only that credential and model, or its explicitly configured quota bucket.", []string{"TestThrottleCoolsOnlyThatCredentialAndModel", "TestQuotaBucketSharedByMemberModels"}, ""),
	spectest.R("A classified quota-exhaustion observation can also use throttled;", []string{"TestClassifiedQuotaExhaustionCools"}, ""),
	spectest.R("a bare 402 is a classified caller error and cannot establish exhaustion.", []string{"TestBareCodeFourZeroTwoCreatesNoCooldown"}, ""),
	spectest.R("Caller errors, transport failures, cancellation and provider failures create no cooldown.", []string{"TestNonCredentialOutcomesCreateNoCooldown"}, ""),
	spectest.R("A classified credential rejection is global only with genuine auth evidence.", []string{"TestSuppliedClassificationOverridesStatus", "TestForbiddenWithoutFlagCreatesNoCooldown"}, ""),
	spectest.R("Pool adapters treat a classified 401 as credential-wide unless credential_wide_auth=False is supplied.", []string{"TestUnauthorizedIsCredentialWideByDefault", "TestUnauthorizedWithFlagFalseCreatesNoCooldown"}, ""),
	spectest.R("A 403 needs an explicit credential_wide_auth=True; endpoint/model permission denial is not enough.", []string{"TestForbiddenWithoutFlagCreatesNoCooldown", "TestForbiddenWithFlagIsCredentialWide"}, ""),
	spectest.R("A supplied classification overrides the status classification, including for cancellation.", []string{"TestSuppliedClassificationOverridesStatus"}, ""),
	spectest.R("Neither health evidence nor cooldown grants replay permission.", []string{"TestPoolNeverWaitsCallsOrParses"}, "decisions: TestAmbiguousFailuresAreNotReplayed, TestDeadlineSharedAndProviderThatNeverAnswersIsNotReplayed"),
	spectest.R("Trusted normalized reset advice is passed as finite nonnegative delay seconds, relative to the observation's monotonic time.", []string{"TestAdviceIsRelativeToObservationTime"}, ""),
	spectest.R("The store does not parse raw headers or provider bodies.", []string{"TestPoolNeverWaitsCallsOrParses"}, ""),
	spectest.R("Invalid advice uses the existing pool's fallback: 60 seconds for throttling, 300 seconds for auth, the validation TTL for (catalog) auth.", []string{"TestInvalidAdviceUsesFallbacks"}, ""),
	spectest.R("The configured maximum caps each observation;", []string{"TestAdviceCappedAtMax", "TestLearnerSuggestionBoundedByAdviceAndCap", "TestFallbackRestEndsAtTheCap", "TestLearnedRestEndsAtTheCap"}, ""),
	spectest.R("positive fractional delays round up only in Retry-After.", []string{"TestFractionalDelayRoundsUpOnlyInRetryAfter"}, "decisions: TestFractionalCooldownRoundsUpOnlyInRetryAfter, TestAdapterRetryAfterIsIntegerNeverZero"),
	spectest.R("At least one second is retained for zero delay to prevent immediate redispatch.", []string{"TestZeroDelayKeepsOneSecond", "TestSiblingReleaseKeepsOneSecondForZeroAdvice"}, ""),
	spectest.R("Success clears only its model/bucket observation.", []string{"TestSuccessOnModelAClearsOnlyModelA", "TestQuotaBucketSharedByMemberModels", "TestSuccessSentBeforeTheThrottleEndsNoCooldown", "TestSuccessSentBeforeARenewedThrottleClearsNothing"}, "decisions: TestInFlightSuccessDoesNotEndALaterThrottlesCooldown (a success sent before the throttle is no evidence of the quota since)"),
	spectest.R("It does not clear another model, an auth rejection, a legacy credential-wide rest or a capacity guard.", []string{"TestSuccessOnModelAClearsOnlyModelA", "TestSuccessDoesNotClearAuthLegacyOrCapacity", "TestScopedSuccessKeepsTheAuthObservation"}, ""),
	spectest.R("Unscoped recording uses the legacy provider-wide rules and leaves model state unchanged.", []string{"TestUnscopedRecordingLeavesModelStateUnchanged", "TestUnscopedPathKeepsLegacyBookkeeping"}, ""),
	spectest.R("Genuine authentication rejection on a scoped path also rests the credential in the legacy map, using the same capped deadline, so unscoped selection observes it.", []string{"TestScopedAuthRejectionBlocksUnscopedSelection", "TestOverflowDeadlineCoversOmittedTTL"}, ""),

	// Selection and errors.
	spectest.R("Scoped selection excludes keys resting in either the model store or the legacy provider-wide map.", []string{"TestScopedSelectionExcludesLegacyRests", "TestThrottleCoolsOnlyThatCredentialAndModel"}, ""),
	spectest.R("Available keys retain configured order.", []string{"TestAvailableKeepsConfiguredOrder"}, ""),
	spectest.R("NanoGPT retains its existing active-key preference and validation TTL (probe bypass, request counts: not applicable).", []string{"TestPreferActive", "TestInvalidAdviceUsesFallbacks"}, ""),
	spectest.R("Filtering several configured keys down to one does not skip validation.", nil, "decisions: TestFilteringToOneKeyDoesNotSkipValidation"),
	spectest.R("During scoped selection, catalog probes carry no model quota evidence: only genuine auth rejection can cool every model from that probe.", []string{"TestCatalogProbeCarriesNoModelQuotaEvidence"}, "decisions: TestCatalogAuthRejectionIsRecordedInThePool"),
	spectest.R("Unscoped validation keeps its legacy rejection rules.", []string{"TestUnscopedCatalogKeepsLegacyRejectionRules"}, ""),
	spectest.R("Raw and unified NanoGPT pools remain isolated.", []string{"TestPoolsIsolated"}, ""),
	spectest.R("CredentialPool.available returns the eligible list.", []string{"TestAvailableKeepsConfiguredOrder", "TestAvailableCallersGetSame429Decision"}, ""),
	spectest.R("select with model/bucket context raises ModelCooldownExhausted when all configured eligible keys are cooling.", []string{"TestAllCoolingIsModelCooldown429"}, ""),
	spectest.R("There is no secret dispatch, additional wait, retry or synthetic completion.", []string{"TestFirstKeyFallbackNeverOnScopedPath", "TestAllCoolingIsModelCooldown429", "TestPoolNeverWaitsCallsOrParses"}, ""),
	spectest.R("An empty configuration retains the existing no-key result.", []string{"TestEmptyConfigurationIsDistinctNoKeyResult"}, ""),
	spectest.R("The error is a real 429 with error: model_cooldown;", []string{"TestAllCoolingIsModelCooldown429"}, "decisions: TestAdapterCodes"),
	spectest.R("the adapter emits bounded integer Retry-After advice to the earliest eligible key's release.", []string{"TestAllCoolingIsModelCooldown429"}, "decisions: TestAdapterRetryAfterIsIntegerNeverZero"),
	spectest.R("A credential's release waits for both its auth and model/bucket observations to expire.", []string{"TestReleaseWaitsForBothAuthAndModelObservation", "TestScopedSuccessKeepsTheAuthObservation"}, ""),
	spectest.R("Register cooldown_error_response for ModelCooldownExhausted and ModelCooldownCapacity.", nil,
		"decisions (the route's one error table, DESIGN): TestAdapterCodes, TestCooldownOutlastingDeadlineGives429WithThatCooldown, TestCooldownStoreFullGives503ModelCooldownCapacity"),
	spectest.R("Preserve these errors through route wrappers instead of translating them to 500/503 or a candidate fallback.", nil,
		"decisions: TestAdapterCodes, TestCooldownStoreFullGives503ModelCooldownCapacity, TestCooldownOutlastingDeadlineGives429WithThatCooldown"),

	// Storage and operational limits.
	spectest.R("Model-scoped state is process-local, protected by a lock and limited to 10000 live observations across both pool implementations.", []string{"TestCapacityTenThousandAndFirstFailsClosed", "TestDefaultStoreLimitIsTheSpecs", "TestCapacitySharedAcrossPools", "TestConcurrentSelectAndRecord"}, ""),
	spectest.R("Credential IDs are SHA-256 HMACs with a random process-local salt and provider/pool namespace.", []string{"TestCredentialIDsAreSaltedPoolNamespacedHMACs", "TestPoolsIsolated"}, ""),
	spectest.R("Scope labels are also HMACs.", []string{"TestCredentialIDsAreSaltedPoolNamespacedHMACs", "TestCooldownStateHoldsNoKeyOrModelName"}, ""),
	spectest.R("New cooldown state stores only digests and monotonic expiry times; it never serializes or logs keys, prompts, completions or model names.", []string{"TestCooldownStateHoldsNoKeyOrModelName", "TestCooldownLogsNameNoKeyOrModel"}, ""),
	spectest.R("The existing pools still retain configured/active keys for dispatch.", []string{"TestPreferActive"}, ""),
	spectest.R("Expired observations are pruned on reads and writes.", []string{"TestExpiredObservationsArePruned", "TestStoreHeapMatchesModel"}, ""),
	spectest.R("A process restart discards observations and changes HMAC identities.", []string{"TestCredentialIDsAreSaltedPoolNamespacedHMACs"}, ""),
	spectest.R("Configured credentials and existing raw/unified pool precedence remain authoritative.", []string{"TestAvailableKeepsConfiguredOrder", "TestSameKeySharesStateWithinPool"}, ""),
	spectest.R("At capacity, live observations are never evicted.", []string{"TestCapacityTenThousandAndFirstFailsClosed", "TestCapacityUnderConcurrency", "TestStoreHeapMatchesModel"}, ""),
	spectest.R("A scalar overflow deadline covers the omitted observation's capped TTL.", []string{"TestOverflowDeadlineCoversOmittedTTL", "TestCapacityWarnsOnceWhenOverflowStarts", "TestReloadThatLowersTheCapEndsTheCapacityGuardByTheNewCap"}, ""),
	spectest.R("During that interval new admission fails closed with 503 and bounded Retry-After;", []string{"TestCapacityTenThousandAndFirstFailsClosed", "TestCapacitySharedAcrossPools"}, ""),
	spectest.R("known all-cooling pools still produce 429.", []string{"TestKnownAllCoolingStill429AtCapacity", "TestCapacityUnderConcurrency"}, ""),
	spectest.R("This capacity failure is not a credential-wide cooldown.", []string{"TestCapacityFailureIsNotCredentialWideCooldown"}, ""),
	spectest.R("Observation itself cannot interrupt an already produced response.", []string{"TestRecordNeverPanics", "TestLearnerPanicDoesNotInterruptRecord"}, ""),
	spectest.R("There are no extra provider calls or charges from cooldown tracking.", []string{"TestPoolNeverWaitsCallsOrParses"}, ""),

	// Request integration.
	spectest.R("Pass the resolved upstream model and configured quota bucket to both selection and recording.", []string{"TestQuotaBucketSharedByMemberModels"}, "decisions: TestRouteScopesCooldownsByUpstreamModelAndBucket"),
	spectest.R("Forward classified outcomes, genuine credential-wide auth evidence and normalized trusted reset advice to recording.", nil, "decisions: TestRouteScopesCooldownsByUpstreamModelAndBucket"),
	spectest.R("For available callers, an empty eligible result needs the same 429 admission decision using select with the original keys and legacy rest deadlines.", []string{"TestAvailableCallersGetSame429Decision"}, ""),
	spectest.R("An empty configuration remains distinct.", []string{"TestEmptyConfigurationIsDistinctNoKeyResult"}, ""),
	spectest.R("Preserve cooldown exceptions through route wrappers rather than treating them as generic candidate failures.", nil,
		"decisions: TestCooldownStoreFullGives503ModelCooldownCapacity, TestWaitsForEarliestReleaseInsideDeadline"),
	spectest.R("Forward MODEL_COOLDOWN_* through the environment; expose Retry-After through CORS.", nil,
		"config: TestModelCooldownSettings; e2e: TestAdversarialBrowserRequestsRefusedWithoutCORS"),
	spectest.R("Tests cover pool selection and recording plus a registered error adapter with fake dispatch.", []string{"TestConcurrentSelectAndRecord"},
		"decisions: TestAdapterCodes, TestCooldownStoreFullGives503ModelCooldownCapacity, TestRouteScopesCooldownsByUpstreamModelAndBucket"),

	// The pool's part of shared/spec/learned-cooldown.md; package learned
	// covers the rest.
	spectest.R("learned: tuning uses natural outcomes already recorded by the pools; it sends no probes or extra provider requests.", []string{"TestLearnerConsultedOnlyForInference", "TestPoolNeverWaitsCallsOrParses"}, "learned"),
	spectest.R("learned: catalog validation probes provide no learning evidence.", []string{"TestLearnerConsultedOnlyForInference"}, ""),
	spectest.R("learned: a quota-only observation uses model:null; names match exactly.", []string{"TestLearnerConsultedOnlyForInference"}, ""),
	spectest.R("learned: with model cooldowns disabled, the pool keeps its legacy credential-wide rests while learning separate scope records.", []string{"TestLearnerLearnsOnLegacyPath"}, ""),
	spectest.R("learned: the model cooldown cap bounds an applied trial; trusted advice is a hard minimum.", []string{"TestLearnerSuggestionBoundedByAdviceAndCap", "TestLearnedRestEndsAtTheCap", "TestSiblingReleaseKeepsAdviceOfAnEarlierThrottle"}, ""),
	spectest.R("learned: credential-keyed HMAC identities per credential, provider, model and bucket; stable across processes; rotation changes them.", []string{"TestLearnerIdentityIsCredentialKeyedAndUnambiguous", "TestLearnIdentityKeepsFieldBoundaries"}, ""),
	spectest.R("learned (adapt): after a success that the learner calls a fall, the pool ends early, where the learner says, the cooldowns its other credentials hold in the same scope; never lengthens one, never cuts a rest a newer throttle set, and a failing learner changes nothing.", []string{"TestSiblingLearnerEndsSiblingsCooldownsEarly", "TestSiblingReleaseKeepsARenewedRestAndSurvivesAPanic"}, ""),
	spectest.R("learned: without a usable suggestion the pool keeps its existing cooldown and keeps serving.", []string{"TestLearnerSuggestionBoundedByAdviceAndCap", "TestLearnerPanicDoesNotInterruptRecord"}, ""),
}

// TestSpecRuleMapIsComplete checks that every rule names a test that exists
// in this package, or an owner elsewhere.
func TestSpecRuleMapIsComplete(t *testing.T) { spectest.Check(t, specRules) }

// TestPoolNeverWaitsCallsOrParses checks the package source: the pool never
// starts a goroutine, a timer or a sleep, never calls a provider, and never
// parses headers (advice reaches it normalized).
func TestPoolNeverWaitsCallsOrParses(t *testing.T) {
	forbidden := map[string]bool{
		"time.Sleep": true, "time.After": true, "time.AfterFunc": true, "time.NewTimer": true, "time.NewTicker": true, "time.Tick": true,
		"clock.Sleep": true, "http.Get": true, "http.Post": true, "http.NewRequest": true, "http.NewRequestWithContext": true,
		"http.DefaultClient": true, "http.Client": true, "httpx.ParseRetryAfter": true, "httpx.ProviderRetryAdvice": true,
	}
	spectest.Forbid(t, forbidden, "NewTimer", "Header")
}
