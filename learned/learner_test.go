package learned

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/pool"
)

const sec = time.Second

// next is when tests start the episode after becomeConfident: within the
// refresh window of its last refusal.
const next = 10 * time.Minute

// --- Configuration -------------------------------------------------------

func TestDefaultModeIsOff(t *testing.T) {
	if m, p := ParseSettings("", "", nil); m != ModeOff || p.Len() != 0 {
		t.Errorf("ParseSettings(\"\", \"\") = %q, %d scopes; want off, empty", m, p.Len())
	}
	if m, _ := ParseSettings("off", "{}", nil); m != ModeOff {
		t.Errorf("ParseSettings(off, {}) = %q, want off", m)
	}
	if got := New(Config{}).Mode(); got != ModeOff {
		t.Errorf("New(Config{}).Mode() = %q, want off", got)
	}
	var nilLearner *Learner
	nilLearner.Observe(pool.LearnEvent{Outcome: pool.OutcomeThrottled})
	if _, ok := nilLearner.Suggest(pool.LearnEvent{Outcome: pool.OutcomeThrottled}); ok || nilLearner.Mode() != ModeOff {
		t.Error("a nil learner is not off")
	}
}

func TestEmptyValuesUseDefaults(t *testing.T) {
	log, buf := newLogger()
	for _, c := range []struct{ mode, policy string }{{"", ""}, {"  ", " "}, {"shadow", ""}, {"apply", "  "}} {
		t.Run(fmt.Sprintf("mode=%q,policy=%q", c.mode, c.policy), func(t *testing.T) {
			m, p := ParseSettings(c.mode, c.policy, log)
			want := ModeOff
			if strings.TrimSpace(c.mode) != "" {
				want = Mode(c.mode)
			}
			if m != want || p.Len() != 0 {
				t.Errorf("ParseSettings(%q, %q) = %q, %d scopes; want %q, empty", c.mode, c.policy, m, p.Len(), want)
			}
		})
	}
	if buf.String() != "" {
		t.Errorf("defaults logged: %s", buf)
	}
}

func TestModesAreOffShadowApply(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Mode
		ok   bool
	}{
		{"off", ModeOff, true}, {"shadow", ModeShadow, true}, {"apply", ModeApply, true}, {" apply ", ModeApply, true}, {"", ModeOff, true},
		{"on", ModeOff, false}, {"Apply", ModeOff, false}, {"true", ModeOff, false}, {"shadow,apply", ModeOff, false},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseMode(c.in)
			if got != c.want || (err == nil) != c.ok {
				t.Errorf("ParseMode(%q) = %q, %v; want %q, ok=%v", c.in, got, err, c.want, c.ok)
			}
		})
	}
}

func TestMalformedModeOrPolicyDisablesTuningWithOneWarning(t *testing.T) {
	const secret = "sk-canary-0f1e2d3c4b5a"
	cases := []struct{ name, mode, policy, setting string }{
		{"mode", secret, testPolicy, "LEARNED_COOLDOWN_MODE"},
		{"policy", "apply", `{"buckets":[{"provider":"` + secret + `","model":"*","quota_bucket":null}]}`, "LEARNED_COOLDOWN_POLICY_JSON"},
		{"policy not JSON", "shadow", secret, "LEARNED_COOLDOWN_POLICY_JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log, buf := newLogger()
			m, p := ParseSettings(c.mode, c.policy, log)
			if m != ModeOff || p.Len() != 0 {
				t.Errorf("ParseSettings = %q, %d scopes; want off, empty", m, p.Len())
			}
			warnings := buf.Lines("level=WARN")
			if len(warnings) != 1 || !strings.Contains(warnings[0], c.setting) {
				t.Errorf("warnings = %q, want one naming %s", warnings, c.setting)
			}
			if strings.Contains(buf.String(), "canary") {
				t.Errorf("the warning quotes the value: %s", buf)
			}
		})
	}
	t.Run("mode given to New", func(t *testing.T) {
		log, buf := newLogger()
		store := &countingStore{inner: NewMemoryStore(0)}
		l := New(Config{Mode: Mode(secret), Policy: mustPolicy(t, testPolicy), Store: store, Logger: log})
		h := &harness{t: t, clk: clock.NewFake(epoch), store: store, l: l,
			ev: pool.LearnEvent{Provider: "api", Model: "decide-mini", Identity: identity("k", "api", "decide-mini", "")}}
		h.throttle(0)
		if l.Mode() != ModeOff || len(buf.Lines("level=WARN")) != 1 || strings.Contains(buf.String(), "canary") {
			t.Errorf("mode %q, log %q; want off and one warning without the value", l.Mode(), buf)
		}
		if g, p := store.ops(); g+p != 0 {
			t.Errorf("a malformed mode did %d storage operations", g+p)
		}
	})
	t.Run("off does not read the policy", func(t *testing.T) {
		log, buf := newLogger()
		if m, _ := ParseSettings("off", "not json", log); m != ModeOff || buf.String() != "" {
			t.Errorf("off with a malformed policy: %q, log %q; want off and no report", m, buf)
		}
	})
}

func TestOffModePerformsNoStorageOperations(t *testing.T) {
	store := &countingStore{inner: NewMemoryStore(0)}
	h := newHarness(t, ModeOff, withStore(store))
	for i := range 10 {
		h.throttle(time.Duration(i) * time.Minute)
		h.success(time.Duration(i)*time.Minute + 30*sec)
	}
	if g, p := store.ops(); g+p != 0 {
		t.Errorf("off mode did %d gets and %d puts, want none", g, p)
	}
	if h.logs.String() != "" {
		t.Errorf("off mode reported: %s", h.logs)
	}
	if s := h.l.Snapshot(); s.Observations != 0 {
		t.Errorf("off mode counted %d observations", s.Observations)
	}
}

func TestShadowLogsSuggestionAndChangesNoCooldown(t *testing.T) {
	h := newHarness(t, ModeShadow)
	h.becomeConfident(0)
	d, ok := h.throttle(next)
	if ok || d != 0 {
		t.Errorf("shadow Suggest = %v, %v; want 0, false (existing cooldown)", d, ok)
	}
	lines := h.logs.Lines("learned cooldown suggestion")
	if len(lines) != 4 { // one per counted throttle
		t.Fatalf("shadow reports = %d, want 4:\n%s", len(lines), h.logs)
	}
	last := lines[len(lines)-1]
	for _, want := range []string{"level=INFO", "bucket=" + bucketDigest(h.ev.Identity), "suggested_seconds=150", "confidence=3", "steps=0", "ready=true"} {
		if !strings.Contains(last, want) {
			t.Errorf("shadow report %q lacks %q", last, want)
		}
	}
	for _, leak := range []string{"decide-mini", h.ev.Identity, "api"} {
		if strings.Contains(h.logs.String(), leak) {
			t.Errorf("shadow report holds %q", leak)
		}
	}
	// Shadow never applies a trial, so it never spends a step.
	if st := h.mustState(); st.steps != 0 || st.decidedAt != 0 {
		t.Errorf("shadow spent steps=%d decidedAt=%d", st.steps, st.decidedAt)
	}
}

func TestApplyUsesSuggestionAfterConsistentEvidence(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	d, ok := h.throttle(next)
	if !ok || d != 150*sec {
		t.Errorf("apply Suggest = %v, %v; want the midpoint trial 150s, true", d, ok)
	}
	if s := h.l.Snapshot(); s.Suggestions != 1 || s.TrialSteps != 1 || s.Evidence != 3 {
		t.Errorf("snapshot = %+v", s)
	}
}

func TestApplyUsesExistingCooldownUntilConfidenceReturns(t *testing.T) {
	h := newHarness(t, ModeApply)
	// The first throttle opens the episode; the retries at 60 s and 120 s
	// are two consistent observations: not yet.
	h.throttle(0)
	h.throttle(60 * sec)
	if _, ok := h.throttle(120 * sec); ok {
		t.Fatal("suggestion at confidence 2")
	}
	h.success(180 * sec) // confidence 3
	if _, ok := h.throttle(next); !ok {
		t.Fatal("no suggestion at confidence 3")
	}
	// A contradiction (a throttle at or past hi) drops confidence...
	if _, ok := h.throttle(next + 200*sec); ok {
		t.Error("a suggestion for the contradicting throttle")
	}
	if st := h.mustState(); st.conf != 0 {
		t.Fatalf("confidence %d after a contradiction", st.conf)
	}
	// ...and it comes back after three consistent observations.
	h.success(next + 300*sec) // 1
	if _, ok := h.throttle(2 * time.Hour); ok {
		t.Error("a suggestion at confidence 1")
	}
	if _, ok := h.throttle(2*time.Hour + 60*sec); ok { // 2
		t.Error("a suggestion at confidence 2")
	}
	if _, ok := h.throttle(2*time.Hour + 120*sec); !ok { // 3
		t.Error("no suggestion once confidence returned")
	}
}

func TestQuotaOnlyObservationUsesNullModel(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.ev = pool.LearnEvent{Provider: "api", QuotaBucket: "shared-decide", Identity: identity("k", "api", "", "shared-decide")}
	h.becomeConfident(0)
	if _, ok := h.throttle(next); !ok {
		t.Error("the quota-only scope (model null) did not learn")
	}
	// The same bucket with a model is another scope, not in the policy.
	h2 := newHarness(t, ModeApply, withStore(h.store))
	h2.ev = pool.LearnEvent{Provider: "api", Model: "decide-mini", QuotaBucket: "shared-decide", Identity: identity("k", "api", "decide-mini", "shared-decide")}
	h2.throttle(0)
	if _, ok := h2.state(); ok {
		t.Error("model+bucket learned from a model:null policy entry")
	}
}

func TestConfiguredNameLearnsNothingUntilExactScopeObserved(t *testing.T) {
	store := &countingStore{inner: NewMemoryStore(0)}
	h := newHarness(t, ModeApply, withStore(store))
	for _, ev := range []pool.LearnEvent{
		{Provider: "api", Model: "decide-large"},
		{Provider: "zdr", Model: "decide-mini"},
		{Provider: "api", Model: "decide-mini", QuotaBucket: "shared-decide"},
		{Provider: "api", Model: "Decide-Mini"},
		{Provider: "zdr", Model: "decide-large"}, // bucket null, policy has one
	} {
		ev.Identity = identity("k", ev.Provider, ev.Model, ev.QuotaBucket)
		ev.Outcome = pool.OutcomeThrottled
		ev.At = epoch
		h.l.Observe(ev)
		if _, ok := h.l.Suggest(ev); ok {
			t.Errorf("Suggest for unconfigured scope %+v", ev)
		}
	}
	if g, p := store.ops(); g+p != 0 {
		t.Errorf("scopes outside the policy did %d storage operations", g+p)
	}
}

func TestTuningOnlyAdjustsDurationAndDoesNotEnableModelCooldown(t *testing.T) {
	// The learner's only output is a duration for a throttle: it cannot
	// create a cooldown, enable model cooldown, or affect other outcomes.
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	for _, o := range []pool.Outcome{pool.OutcomeSuccess, pool.OutcomeCredentialRejected, pool.OutcomeCallerError,
		pool.OutcomeTransportFailure, pool.OutcomeCancelled, pool.OutcomeProviderFailure, pool.OutcomeUnknown} {
		if d, ok := h.l.Suggest(h.event(o, time.Hour)); ok {
			t.Errorf("Suggest(%v) = %v, true; want false", o, d)
		}
	}
}
