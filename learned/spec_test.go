package learned

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/spectest"
)

// specRules maps every rule of shared/spec/learned-cooldown.md, in the
// spec's order, to the tests in this package that cover it. A rule this
// package cannot hold (the pools' wiring, the SQLite store, the settings'
// environment) names its owner. rotor's deliberate departures from the
// spec close the table, marked "(rotor)"; the README's Cooldowns section
// says why each one exists. TestSpecRuleMapIsComplete keeps the table
// honest.
var specRules = []spectest.Rule{
	// Opening.
	spectest.R("Cooldown tuning uses natural throttle and recovery outcomes already recorded by the credential pools.", nil, "pool: TestLearnerConsultedOnlyForInference"),
	spectest.R("It sends no probes or extra provider requests.", []string{"TestLearnerSendsNoRequestsAndParsesNoHeaders"}, "pool: TestPoolNeverWaitsCallsOrParses"),
	spectest.R("It adjusts only a cooldown duration; route order, credential preference and replay permission remain with their existing policies.", []string{"TestTuningOnlyAdjustsDurationAndDoesNotEnableModelCooldown"}, "pool: TestLearnerLearnsOnLegacyPath"),

	// Configuration.
	spectest.R("The default is disabled: LEARNED_COOLDOWN_MODE=off, LEARNED_COOLDOWN_POLICY_JSON='{}'.", []string{"TestDefaultModeIsOff"}, ""),
	spectest.R("Empty values use these defaults.", []string{"TestEmptyValuesUseDefaults", "TestEmptyPolicyValuesUseDefault"}, ""),
	spectest.R("A malformed mode or policy disables tuning and logs one warning without the supplied value.", []string{"TestMalformedModeOrPolicyDisablesTuningWithOneWarning", "TestPolicyErrorsNeverQuoteValues", "TestPolicySyntaxErrorsQuoteNoCharacter"}, "config: TestNonScalarSpecSettingIsMalformedNotFatal; cmd/rotor: TestMalformedPolicyWarningNamesTheEntry"),
	spectest.R("Modes are off, shadow and apply.", []string{"TestModesAreOffShadowApply"}, ""),
	spectest.R("Policies contain only a buckets array, with at most 128 entries and 32 KiB of JSON.", []string{"TestPolicyContainsOnlyBucketsArray", "TestPolicyAtMost128Entries", "TestPolicyAtMost32KiB", "TestSpecFigures"}, ""),
	spectest.R("Each entry requires exactly provider, model and quota_bucket.", []string{"TestPolicyEntryRequiresExactlyProviderModelQuotaBucket"}, ""),
	spectest.R("Provider must be a nonempty string;", []string{"TestPolicyProviderIsNonemptyString"}, ""),
	spectest.R("model and quota bucket are nonempty strings or null, and at least one must be nonnull.", []string{"TestPolicyModelAndQuotaBucketAreNonemptyStringsOrNull", "TestPolicyNeedsModelOrQuotaBucket"}, ""),
	spectest.R("Names match exactly, including null values.", []string{"TestPolicyNamesMatchExactlyIncludingNull", "TestConfiguredNameLearnsNothingUntilExactScopeObserved"}, ""),
	spectest.R("Wildcards, duplicate fields, duplicate scopes, control characters and unknown fields are rejected.", []string{"TestPolicyRejectsWildcards", "TestPolicyRejectsDuplicateFields", "TestPolicyRejectsDuplicateScopes", "TestPolicyRejectsControlCharacters", "TestPolicyRejectsUnknownFields"}, ""),
	spectest.R("Shadow logs the suggested seconds, opaque bucket digest, confidence and step count. It preserves existing cooldowns and selection.", []string{"TestShadowLogsSuggestionAndChangesNoCooldown", "TestShadowBucketLabelSharesNothingWithTheIdentity"}, ""),
	spectest.R("Apply uses a suggested duration after sufficient consistent evidence.", []string{"TestApplyUsesSuggestionAfterConsistentEvidence"}, ""),
	spectest.R("For a named quota bucket, specify its exact name and the model recorded by the transport.", []string{"TestConfiguredNameLearnsNothingUntilExactScopeObserved", "TestSeparateEvidencePerCredentialProviderModelBucket"}, ""),
	spectest.R("A quota-only observation uses model:null.", []string{"TestQuotaOnlyObservationUsesNullModel"}, ""),
	spectest.R("A configured name learns nothing until a pool receives natural outcomes with that exact scope.", []string{"TestConfiguredNameLearnsNothingUntilExactScopeObserved"}, ""),
	spectest.R("MODEL_COOLDOWN_ENABLED still controls the existing model-scoped admission policy. Tuning does not enable it.", []string{"TestTuningOnlyAdjustsDurationAndDoesNotEnableModelCooldown", "TestLearnerSendsNoRequestsAndParsesNoHeaders"}, "pool: TestLearnerLearnsOnLegacyPath"),
	spectest.R("With model cooldowns disabled, the pool keeps its legacy credential-wide rest semantics while learning separate scope records.", nil, "pool: TestLearnerLearnsOnLegacyPath"),

	// Evidence and bounds.
	spectest.R("The interval starts at 1-3,600 seconds.", []string{"TestIntervalStartsAt1To3600Seconds"}, ""),
	spectest.R("A later natural throttle in the same credential/model/quota bucket raises its lower bound from the failed wait.", []string{"TestLaterThrottleRaisesLowerBoundFromFailedWait", "TestRecoveryAfterTheExistingCooldownIsLearned", "TestThrottleSentAfterRecoveryOpensAnEpisode", "TestThrottleSentAfterTheThrottleIsARefusedWait"}, ""),
	spectest.R("A genuine successful request after a throttle lowers its upper bound from the elapsed wait.", []string{"TestSuccessAfterThrottleLowersUpperBoundFromElapsedWait", "TestRecoveryAfterTheExistingCooldownIsLearned", "TestInFlightSuccessIsNotARecovery", "TestSuccessSentBeforeTheThrottleIsNotARecovery", "TestSuccessSentAfterTheThrottleIsARecovery"}, "pool: TestFirstKeyFallbackRecoveryIsLearned"),
	spectest.R("Success without a preceding throttle provides no recovery sample.", []string{"TestSuccessWithoutPrecedingThrottleProvidesNoSample"}, ""),
	spectest.R("Authentication rejection, caller errors, cancellation, transport errors and catalog validation probes provide no learning evidence.", []string{"TestNonLearningOutcomesProvideNoEvidence"}, "pool: TestLearnerConsultedOnlyForInference (catalog probes never reach the learner)"),
	spectest.R("Three consistent directional observations allow a midpoint trial.", []string{"TestThreeConsistentObservationsAllowMidpointTrial", "TestSpecFigures"}, ""),
	spectest.R("Each state allows at most 12 trial steps.", []string{"TestAtMost12TrialSteps", "TestThrottlesOfTheSameInstantSpendOneStep", "TestSpecFigures"}, ""),
	spectest.R("Contradictory observations or nonincreasing timestamps widen the interval and remove confidence.", []string{"TestContradictionWidensIntervalAndRemovesConfidence", "TestNonincreasingTimestampWidensIntervalAndRemovesConfidence"}, ""),
	spectest.R("Apply uses the existing cooldown until confidence returns.", []string{"TestApplyUsesExistingCooldownUntilConfidenceReturns"}, ""),
	spectest.R("The existing model cooldown cap also bounds an applied trial.", []string{"TestModelCooldownCapBoundsAppliedTrial"}, "pool: TestLearnerSuggestionBoundedByAdviceAndCap"),
	spectest.R("Trusted Retry-After or reset seconds supplied by the transport are a hard minimum, even when longer than 3,600 seconds.", []string{"TestRetryAfterIsHardMinimumEvenAbove3600", "TestApplyNeverGoesUnderRetryAfterHint", "TestSmallerLaterAdviceDoesNotLowerTheMinimum"}, ""),
	spectest.R("Such hints can prevent any shortening.", []string{"TestHintsCanPreventShortening"}, ""),
	spectest.R("Invalid or nonfinite hints are ignored.", []string{"TestInvalidOrNonfiniteHintsIgnored"}, ""),
	spectest.R("No header is parsed or rewritten by the learner.", []string{"TestLearnerSendsNoRequestsAndParsesNoHeaders"}, ""),
	spectest.R("Each credential, provider, model and quota bucket has separate evidence.", []string{"TestSeparateEvidencePerCredentialProviderModelBucket"}, ""),
	spectest.R("Model and quota names are never stored.", []string{"TestModelAndQuotaNamesNeverStored"}, ""),
	spectest.R("Credential-keyed HMAC digests provide stable opaque identities across processes; credentials and prefixes are never stored in learned state.", []string{"TestIdentitiesAreOpaqueDigests", "TestSharedStoreAcrossProcesses", "TestIdentitiesOfOtherShapesAreNeverStored"}, "pool: TestLearnerIdentityIsCredentialKeyedAndUnambiguous"),
	spectest.R("Rotating a credential creates a new identity.", []string{"TestRotatedCredentialStartsNewIdentity"}, "pool: TestLearnerIdentityIsCredentialKeyedAndUnambiguous"),

	// Storage, errors and retention.
	spectest.R("Standalone (rotor's default) uses process-local state, bounded to 1,024 entries.", []string{"TestProcessLocalStateBoundedTo1024", "TestMemoryStoreConformance", "TestSpecFigures"}, ""),
	spectest.R("It resets on process restart and is not a distributed quota authority.", []string{"TestStateResetsOnRestart"}, ""),
	spectest.R("State expires seven days after creation; observations do not extend its lifetime.", []string{"TestStateExpiresSevenDaysAfterCreationNotExtended", "TestMemoryStoreConformance", "TestSpecFigures"}, ""),
	spectest.R("The shared backend (rotor: INTELLIGENCE_STORAGE_BACKEND=sqlite, the ledger database) is a private storage domain with the fixed operations get and put; puts use revision comparison and a transactional capacity check.", []string{"TestMemoryStoreConformance"}, "ledger/learnedstore: TestSQLiteStoreConformance; ledger/pgledger: TestLearnedStoreConformance, TestConformance (LearnedConcurrentPutsNoLostUpdateNoOverflow: processes racing, both engines)"),
	spectest.R("Storage is bounded to 1,024 rows. Reads ignore expired state; writes reclaim expired rows.", []string{"TestMemoryStoreConformance", "TestMemoryStoreReclaimsAfterTheClockWentBack", "TestMemoryStoreKeepsReclaimingAsRecordsExpire"}, "ledger/learnedstore: TestSQLiteStoreConformance"),
	spectest.R("A missing table or unavailable store: the pool falls back to its existing cooldown with one warning and continues serving traffic.", []string{"TestUnavailableStoreFallsBackWithOneWarning", "TestStoreOperationsHaveTheDefaultTimeout"}, "ledger/learnedstore: TestMissingTableIsUnavailable (rotor has no storage route to answer 503)"),
	spectest.R("A stale revision, invalid stored state or full capacity also prevents applying a suggestion.", []string{"TestStaleRevisionIsRefusedAndPreventsApplying", "TestInvalidStoredStatePreventsApplying", "TestFullStoreRefusesNewScopesButKeepsServing", "TestDecodeRefusesStatesObserveNeverKeeps"}, ""),
	spectest.R("No public route or new response header is introduced.", []string{"TestLearnerSendsNoRequestsAndParsesNoHeaders"}, "runtime"),
	spectest.R("Default-off mode performs no learned-state storage operations or reports.", []string{"TestOffModePerformsNoStorageOperations"}, ""),
	spectest.R("Shadow observation and storage writes add no provider usage; existing transport accounting and retry safety remain authoritative.", []string{"TestLearnerSendsNoRequestsAndParsesNoHeaders"}, "decisions"),

	// rotor's departures, each in the README's Cooldowns section.
	spectest.R("(rotor) A learned wait longer than the existing cooldown is used only while a refusal was seen in the last 15 minutes.", []string{"TestStaleLongerWaitIsRefreshedByExistingCooldown"}, ""),
	spectest.R("(rotor) Observations less than a second out of order are concurrent, not a nonincreasing timestamp.", []string{"TestNonincreasingTimestampWidensIntervalAndRemovesConfidence", "TestConcurrentThrottlesAreOneObservation"}, ""),
	spectest.R("(rotor) A write refused for a stale revision is retried once on fresh state.", []string{"TestStaleRevisionIsRetriedOnce", "TestStaleRevisionIsRefusedAndPreventsApplying"}, ""),
	spectest.R("(rotor) A trial needs an upper bound proven by a recovery, besides three consistent observations.", []string{"TestTrialNeedsARecovery"}, ""),

	// learned_cooldown.adapt (off by default; issue 19): departures taken
	// only with it on, each in the README's Cooldowns section, and the
	// spec's bounds it keeps.
	spectest.R("(rotor, adapt) Each episode that ends in a recovery is interval evidence on the reset (longest refused wait, the recovery], or, after a prompt recovery, (longest refused wait, the roundest time from the wait that ran out to the recovery]; the state keeps the last eight, so evidence ages.", []string{"TestAdaptBisectsToTheExactReset", "TestAdaptRefusedTrialReturnsToTheHeldWait", "TestAdaptPromptRecoveryTakesTheRoundestWait"}, "learned/sim: TestAdaptCells"),
	spectest.R("(rotor, adapt) While the evidence agrees, natural retries narrow it to the roundest wait it leaves open, then hold it, and so they do once the newest two episodes agree on a reset that moved, unless its resets are drawn anew (a miss share under an eighth); the existing cooldown is matched exactly when it fits, and no retry is planned in the last eighth below it while it is held; until a refusal proves the reset longer than the existing cooldown, adapt waits no longer than it, also after a refused trial; with the credit at its cap, a plan that would hold, or try a wait inside the evidence, checks the evidence's lower bound with a retry an eighth below it; a reset seen before a spell of others is known again at once; a retry refused in the last second before the plan's next one rests only until it, less than a second, unless trusted advice asks for more.", []string{"TestAdaptBisectsToTheExactReset", "TestSettled", "TestAdaptNarrowsAMovedResetBeforeTheOldLeaves", "TestAdaptMatchesExistingCooldownWhenItFits", "TestPlanKeepsTrialsClearOfAHeldExistingCooldown", "TestAdaptNeverWaitsPastTheExistingUnproven", "TestAdaptChecksTheLowerBoundWhenCreditPilesUp", "TestAdaptKnowsAResetSeenBeforeASpell", "TestAdaptRefusedLateTrialEndsAtTheHeldWait"}, "learned/sim: TestAdaptCells (steady 60), TestAdaptNeverIdlesAtAnExactReset; learned: FuzzAdaptTransitions (advice)"),
	spectest.R("(rotor, adapt) An exact hold (a whole ring of agreeing episodes resolved at a multiple of the existing cooldown, longer than it) checks its lower bound an eighth below with its trial, or deeper where the plan put its trial; after three refused checks since a trial last succeeded its trial goes to the existing cooldown, then a check follows only while credit was at its cap, and a retry the plan puts a second or two above the hold goes to the hold.", []string{"TestAdaptExactHoldFindsADrop", "TestAdaptExactHoldOnlyAtAMultiple", "TestAdaptExactHoldTakesADeeperPlannedTrial", "TestAdaptExactHoldRetriesAtTheHold"}, "learned/sim: TestAdaptCells (step 300->60, drifting)"),
	spectest.R("(rotor, adapt) Retries are planned to minimise the expected idle time plus a price per refusal, R taken as a mixture of the newest evidence, a small move, older evidence and a broad base whose pieces end on round waits; the price is the least whose plan expects at most 0.4 of the existing cooldown's refusals and no more than the refusal credit, so a natural request goes earlier (a shorter cooldown, never an extra request) and a shorter reset is seen.", []string{"TestPlanTabulatesTheBelief", "TestPlanFirstIsOptimal", "TestPlanCheapestKeepsTheBudget", "TestAdaptSeesAShorterReset", "TestAdaptFindsALongResetOnTheMinute", "TestAdaptRefusedTrialReturnsToTheHeldWait"}, "learned/sim: TestAdaptAddsNoRequests"),
	spectest.R("(rotor, adapt) The chance that the evidence changes is at least the recent share of episodes whose reset fell outside the evidence they started from (each recovered episode keeps seven eighths of it), and at least how far apart neighbouring intervals lie against how far apart any two lie (a reset drawn anew every episode); older evidence spread over its hull reaches down to no interval's lower half.", []string{"TestAdaptMissShare", "TestAdaptDrawnAnew", "TestAdaptHullSkipsCensoredLows"}, "learned/sim: TestAdaptCells (noisy, bursty)"),
	spectest.R("(rotor, adapt) Where the resets look drawn anew (drawnAnew 0.7 or more), the broad base's weight below the floor of the ring (the lowest lower bound of its intervals) is scaled to the share of the episodes outside all older evidence that lay more than a factor 1.6 below it (a fall), with a prior of half an episode.", []string{"TestAdaptBroadBaseBelowTheFloorWeighsFalls"}, "learned/sim: TestAdaptOnLongResetsDrawnAnew (noisy 400-800 at 1 req/s)"),
	spectest.R("(rotor, adapt) Each episode that recovers earns credit worth 0.4 of the existing cooldown's refusals at the newest evidence, at no more than the wait that ran out before the recovery unless the evidence proves the reset longer; each refusal spends one, running into debt that later episodes repay first, but a refusal before any evidence spends nothing; beyond all evidence the plan is made afresh, and past its broad base the wait grows by steps.", []string{"TestAdaptRefusalsRunIntoDebt", "TestAdaptLateRecoveryEarnsAtTheWait", "TestAdaptFirstEpisodeRunsNoDebt", "TestAdaptDebtHoldsTheWait", "TestAdaptSpreadWithinHalfTheExistingRefusals", "TestAdaptGrowsAfterALongerReset"}, "learned/sim: TestAdaptCells (noisy, bursty, drifting), TestAdaptWastesLittleWhereACredentialIsSeldomNeeded"),
	spectest.R("(rotor, adapt) When one credential's reset falls below its evidence's lower bound, each other credential of the same provider, model and quota bucket retries once at the wait it recovered at, where its own plan would retry later, within an hour and while its credit holds a refusal; the fall is kept in memory only.", []string{"TestAdaptTriesASiblingsFall", "TestAdaptTriesASiblingsFallOnce"}, "learned: FuzzAdaptTransitions drives two siblings"),
	spectest.R("(rotor, adapt) A sibling already cooling when the fall is seen has its cooldown ended at the fall's wait after its own first throttle (now, if that has passed), once, if its episode began no earlier than the faller's, no retry of it was refused at or beyond that wait, its own resets are not drawn anew (a miss share under an eighth), and its credit holds a refusal; never before trusted advice; the retry is evidence like any other.", []string{"TestAdaptReleasesASiblingsHeldCooldown", "TestAdaptReleaseBounds"}, "learned: FuzzAdaptTransitions releases a sibling (releaseSeed)"),
	spectest.R("(rotor, adapt) A credential whose episode began within two minutes of a sibling's (same provider, model and quota bucket) does not retry at or below a wait the sibling just had refused, if that wait is at or beyond its own held wait and its own resets are not drawn anew (a miss share under a sixteenth); its plan's next retry after that wait comes instead; the refusal is kept in memory only, the latest of each of up to four credentials per scope, so that a credential's own refusal does not hide its sibling's.", []string{"TestAdaptSkipsASiblingsRefusedRetries", "TestAdaptSkipRiseBounds", "TestRiseMemoryKeepsAnotherCredentials", "TestCheckMemory"}, "learned: FuzzAdaptTransitions drives two siblings"),
	spectest.R("(rotor, adapt) A credential whose resets moved lately (a miss share of 8/256 or more), whose episode began within two minutes of a sibling's and whose credit holds a refusal, does not retry at or past the sibling's pending check of a fall (a retry at or below the lower bound of what the sibling's evidence left open, due before its own and after now, beyond its own elapsed wait); it retries instead in the middle third between that check and its own plan's next retry after it, a trial: if the reset fell that far, the sibling's recovery releases it there; if not, it checks a smaller fall the sibling's retry will not see. Pending checks are kept in memory only, one for each of up to four credentials per scope, dropped when the credential decides a retry above its lower bound.", []string{"TestAdaptSplitsASiblingsCheck", "TestAdaptSplitCheckBounds", "TestCheckMemory"}, "learned: FuzzAdaptTransitions drives two siblings; learned/sim: TestAdaptCells (random schedules)"),
	spectest.R("(rotor, adapt) When a credential recovers from an episode whose refused retries reached the wait its evidence held, a credential of the same provider, model and quota bucket whose episode begins within five minutes after it keeps its first retry, and once that is refused does not retry at or below the longest refused wait of the climb, if its own newest evidence is a rise proven by a refusal and reaching past that wait and its own resets are not drawn anew (a miss share under a quarter); its plan's next retry after that wait comes instead; the climb is kept in memory only, the latest of each of up to four credentials per scope.", []string{"TestAdaptSkipsPastASiblingsClimb", "TestAdaptSkipClimbBounds", "TestClimbed", "TestClimbMemory"}, "learned: FuzzAdaptTransitions drives two siblings; learned/sim: TestAdaptCells (bursty)"),
	spectest.R("(rotor, adapt) A credential whose episode begins with no episode of another credential of the same provider, model and quota bucket begun within five minutes before it leads a round of throttles: where the lower bound of what its evidence left open is at least five existing cooldowns, its resets are not drawn anew (drawnAnew under 0.7) and no interval of its ring lies below half that bound, its plan gives a fall a fifth more weight, spread evenly from the existing cooldown up to halfway to that bound; episode starts are kept in memory only.", []string{"TestAdaptRoundLeadLooksForFall", "TestLeadsRound", "TestSiblingMemoriesExpire"}, "learned/sim: TestAdaptOnUntunedSchedules (random 3 at 0.2 req/s)"),
	spectest.R("(rotor, adapt) The 12 trial steps renew hourly.", []string{"TestAdaptStepBudgetRenewsHourly"}, "learned: FuzzAdaptTransitions checks the 12-step bound"),
	spectest.R("(rotor, adapt) Trusted hints stay a hard minimum and the model cooldown cap bounds every wait.", []string{"TestAdaptNeverBelowTrustedHint", "TestAdaptBoundedByModelCooldownCap"}, "learned: FuzzAdaptTransitions also"),
	spectest.R("(rotor, adapt) Storage bounds stay: 1,024 records, seven-day expiry, HMAC digests only; adapt off stores the version-1 record.", []string{"TestAdaptKeepsStorageBounds", "TestAdaptOffStoresVersion1"}, ""),
}

// TestSpecRuleMapIsComplete checks that every rule names a test that exists
// in this package, or an owner elsewhere.
func TestSpecRuleMapIsComplete(t *testing.T) { spectest.Check(t, specRules) }

// TestLearnerSendsNoRequestsAndParsesNoHeaders checks the package source:
// the learner imports no network or HTTP package and no rotor package but
// pool and internal helpers, so it can send no probe, parse or rewrite no
// header, add no route, and enable no model cooldown (its only output is a
// duration returned to the pool); nor does it start goroutines or timers of
// its own.
func TestLearnerSendsNoRequestsAndParsesNoHeaders(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case path == "net" || strings.HasPrefix(path, "net/") || path == "os/exec":
				t.Errorf("%s imports %s", name, path)
			case strings.HasPrefix(path, "github.com/rotorhq/rotor/") &&
				path != "github.com/rotorhq/rotor/pool" && !strings.HasPrefix(path, "github.com/rotorhq/rotor/internal/"):
				t.Errorf("%s imports %s", name, path)
			case strings.HasPrefix(path, "github.com/rotorhq/rotor/internal/httpx"):
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
	spectest.Forbid(t, map[string]bool{"time.Sleep": true, "time.After": true, "time.AfterFunc": true,
		"time.NewTimer": true, "time.NewTicker": true, "time.Tick": true}, "Header")
}

// TestTrialNeedsARecovery: throttles alone, however many and however
// consistent, never allow a trial; the upper bound must be proven by a
// recovery first (hi stays at 3,600 s until a success sets it, and a
// midpoint below an unproven bound would be a guess).
func TestTrialNeedsARecovery(t *testing.T) {
	h := newHarness(t, ModeApply)
	// One long episode refused every minute: lo climbs, confidence grows.
	for i := range 10 {
		if d, ok := h.throttle(time.Duration(i) * time.Minute); ok {
			t.Fatalf("throttle %d: a trial of %v without any recovery", i, d)
		}
	}
	if st := h.mustState(); st.conf < confidentAt || st.hi != maxBoundMS {
		t.Fatalf("after ten throttles: conf=%d hi=%d; want at least %d and %d", st.conf, st.hi, confidentAt, maxBoundMS)
	}
	// One recovery proves an upper bound: the next episode gets a trial.
	h.success(10 * time.Minute)
	if _, ok := h.throttle(20 * time.Minute); !ok {
		t.Error("no trial after a recovery proved the upper bound")
	}
}

// TestSpecFigures holds the spec's numbers themselves: the rule tests
// take them through these constants, so a changed constant would change
// their expectations with it.
func TestSpecFigures(t *testing.T) {
	for name, c := range map[string]struct{ got, want int64 }{
		"confidentAt (three consistent observations)": {confidentAt, 3},
		"MaxTrialSteps":           {MaxTrialSteps, 12},
		"StoreCapacity":           {StoreCapacity, 1024},
		"Retention (seven days)":  {int64(Retention), int64(7 * 24 * time.Hour)},
		"MaxPolicyBytes (32 KiB)": {MaxPolicyBytes, 32 * 1024},
		"MaxPolicyBuckets":        {MaxPolicyBuckets, 128},
		"minBoundMS (1 s)":        {minBoundMS, 1000},
		"maxBoundMS (3,600 s)":    {maxBoundMS, 3_600_000},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want the spec's %d", name, c.got, c.want)
		}
	}
}
