package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

// Evidence: which outcomes cool what.

func TestClassifiedQuotaExhaustionCools(t *testing.T) {
	f := newFixture(t)
	f.record("a", Observation{Scope: modelA, Status: 402, Outcome: OutcomeThrottled})
	f.wantAvailable(modelA, "b", "c")
	f.wantAvailable(modelB, "a", "b", "c")
}

func TestBareCodeFourZeroTwoCreatesNoCooldown(t *testing.T) {
	for _, mod := range []func(*Config){func(*Config) {}, disabled} {
		f := newFixture(t, mod)
		for _, s := range []Scope{modelA, unscoped} {
			f.record("a", status(s, 402))
			f.record("a", Observation{Scope: s, Status: 402, Catalog: true})
		}
		f.wantAvailable(modelA, "a", "b", "c")
		f.wantAvailable(unscoped, "a", "b", "c")
	}
}

func TestNonCredentialOutcomesCreateNoCooldown(t *testing.T) {
	cases := []struct {
		name string
		obs  Observation
	}{
		{"caller error 400", Observation{Status: 400}},
		{"caller error 404", Observation{Status: 404}},
		{"caller error 413", Observation{Status: 413}},
		{"caller error 422", Observation{Status: 422}},
		{"transport failure", Observation{Err: errors.New("connection reset by peer")}},
		{"cancellation", Observation{Err: context.Canceled}},
		{"deadline", Observation{Err: fmt.Errorf("read body: %w", context.DeadlineExceeded)}},
		{"provider failure 500", Observation{Status: 500}},
		{"provider failure 503 with advice", Observation{Status: 503, RetryAfter: 30, HasRetryAfter: true}},
		{"nothing read", Observation{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, mod := range []func(*Config){func(*Config) {}, disabled} {
				f := newFixture(t, mod)
				for _, s := range []Scope{modelA, mini, unscoped} {
					o := tc.obs
					o.Scope = s
					f.record("a", o)
				}
				for _, s := range []Scope{modelA, mini, unscoped} {
					f.wantAvailable(s, "a", "b", "c")
				}
				if n := f.store.Len(); n != 0 {
					t.Errorf("store.Len() = %d, want 0", n)
				}
			}
		})
	}
}

func TestUnauthorizedIsCredentialWideByDefault(t *testing.T) {
	f := newFixture(t)
	f.record("a", status(modelA, 401))
	for _, s := range []Scope{modelA, modelB, mini, unscoped} {
		f.wantAvailable(s, "b", "c")
	}
	f.clk.Advance(DefaultAuthRest - time.Nanosecond)
	f.wantAvailable(modelB, "b", "c")
	f.clk.Advance(time.Nanosecond)
	f.wantAvailable(modelB, "a", "b", "c")
}

func TestUnauthorizedWithFlagFalseCreatesNoCooldown(t *testing.T) {
	f := newFixture(t)
	f.record("a", Observation{Scope: modelA, Status: 401, CredentialWideAuth: boolp(false)})
	f.record("a", Observation{Scope: unscoped, Status: 401, CredentialWideAuth: boolp(false)})
	f.wantAvailable(modelA, "a", "b", "c")
	f.wantAvailable(unscoped, "a", "b", "c")
}

func TestForbiddenWithoutFlagCreatesNoCooldown(t *testing.T) {
	f := newFixture(t)
	f.record("a", status(modelA, 403)) // endpoint or model permission denial
	f.record("a", status(unscoped, 403))
	f.record("a", Observation{Scope: modelA, Status: 403, Catalog: true})
	f.wantAvailable(modelA, "a", "b", "c")
	f.wantAvailable(unscoped, "a", "b", "c")
}

func TestForbiddenWithFlagIsCredentialWide(t *testing.T) {
	f := newFixture(t)
	f.record("a", Observation{Scope: modelA, Status: 403, CredentialWideAuth: boolp(true)})
	f.wantAvailable(modelB, "b", "c")
	f.wantAvailable(unscoped, "b", "c")
}

func TestSuppliedClassificationOverridesStatus(t *testing.T) {
	cases := []struct {
		name    string
		obs     Observation
		cooling bool
	}{
		{"429 classified cancelled", Observation{Status: 429, Outcome: OutcomeCancelled}, false},
		{"429 classified caller error", Observation{Status: 429, Outcome: OutcomeCallerError}, false},
		{"401 classified provider failure", Observation{Status: 401, Outcome: OutcomeProviderFailure}, false},
		{"cancellation classified throttled", Observation{Err: context.Canceled, Outcome: OutcomeThrottled}, true},
		{"cancellation unclassified", Observation{Err: context.Canceled}, false},
		{"200 classified throttled", Observation{Status: 200, Outcome: OutcomeThrottled}, true},
		{"500 classified genuine auth", Observation{Status: 500, Outcome: OutcomeCredentialRejected, CredentialWideAuth: boolp(true)}, true},
		{"classified rejection without auth evidence", Observation{Outcome: OutcomeCredentialRejected}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			o := tc.obs
			o.Scope = modelA
			f.record("a", o)
			if got := f.cooling("a", modelA); got != tc.cooling {
				t.Errorf("a cooling = %v, want %v", got, tc.cooling)
			}
		})
	}
}

// Durations: advice, fallbacks, bounds.

// cooldownAfter records obs for the only credential of a fresh pool and
// returns how long it cools under s.
func cooldownAfter(t *testing.T, obs Observation, s Scope, mods ...func(*Config)) time.Duration {
	t.Helper()
	mods = append([]func(*Config){func(c *Config) { c.Credentials = testCreds[:1] }}, mods...)
	f := newFixture(t, mods...)
	f.record("a", obs)
	d, ok := f.pool.NextRelease(s, nil)
	if !ok {
		return 0
	}
	return d
}

func TestAdviceIsRelativeToObservationTime(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Credentials = testCreds[:1] })
	f.clk.Advance(time.Minute)
	f.record("a", throttleFor(modelA, 10))
	f.clk.Advance(10*time.Second - time.Millisecond)
	f.wantExhausted(modelA, true, time.Millisecond)
	f.clk.Advance(time.Millisecond)
	f.wantSelect(modelA, "a")
}

func TestInvalidAdviceUsesFallbacks(t *testing.T) {
	invalid := []struct {
		name   string
		advice float64
		has    bool
	}{
		{"absent", 0, false},
		{"NaN", math.NaN(), true},
		{"negative", -1, true},
		{"+Inf", math.Inf(1), true},
		{"-Inf", math.Inf(-1), true},
	}
	authRest := func(c *Config) { c.Options.AuthRest = 120 * time.Second }
	catalogTTL := func(c *Config) { c.Options.AuthRest, c.Options.CatalogTTL = 120*time.Second, 45*time.Second }
	kinds := []struct {
		name string
		obs  Observation
		mod  func(*Config)
		want time.Duration
	}{
		{"throttle", Observation{Status: 429}, nil, 60 * time.Second},
		{"inference auth default", Observation{Status: 401}, nil, 300 * time.Second},
		{"inference auth configured", Observation{Status: 401}, authRest, 120 * time.Second},
		{"catalog auth", Observation{Status: 401, Catalog: true}, catalogTTL, 45 * time.Second},
		{"catalog auth without a TTL uses AuthRest", Observation{Status: 401, Catalog: true}, authRest, 120 * time.Second},
	}
	for _, k := range kinds {
		for _, a := range invalid {
			for _, path := range []struct {
				name  string
				scope Scope
				mod   func(*Config)
			}{{"scoped", modelA, nil}, {"unscoped", unscoped, nil}, {"disabled", modelA, disabled}} {
				t.Run(k.name+"/"+a.name+"/"+path.name, func(t *testing.T) {
					o := k.obs
					o.Scope, o.RetryAfter, o.HasRetryAfter = path.scope, a.advice, a.has
					var mods []func(*Config)
					for _, m := range []func(*Config){k.mod, path.mod} {
						if m != nil {
							mods = append(mods, m)
						}
					}
					if got := cooldownAfter(t, o, path.scope, mods...); got != k.want {
						t.Errorf("cooldown = %v, want %v", got, k.want)
					}
				})
			}
		}
	}
	// Valid advice wins over every fallback, auth included.
	if got := cooldownAfter(t, Observation{Scope: modelA, Status: 401, RetryAfter: 7, HasRetryAfter: true}, modelB); got != 7*time.Second {
		t.Errorf("auth with 7 s advice cools %v, want 7s", got)
	}
}

func TestAdviceCappedAtMax(t *testing.T) {
	cases := []struct {
		name  string
		obs   Observation
		scope Scope
		mods  []func(*Config)
		want  time.Duration
	}{
		{"scoped throttle", throttleFor(modelA, 1e9), modelA, nil, 100 * time.Second},
		{"huge advice", throttleFor(modelA, 1e300), modelA, nil, 100 * time.Second},
		{"advice under the cap", throttleFor(modelA, 99.5), modelA, nil, 99500 * time.Millisecond},
		{"unscoped throttle", throttleFor(unscoped, 5000), unscoped, nil, 100 * time.Second},
		{"disabled throttle", throttleFor(modelA, 5000), modelA, []func(*Config){disabled}, 100 * time.Second},
		{"auth fallback over the cap", status(modelA, 401), modelB, nil, 100 * time.Second},
		{"catalog auth fallback over the cap", Observation{Scope: modelA, Status: 401, Catalog: true}, modelB,
			[]func(*Config){func(c *Config) { c.Options.CatalogTTL = time.Hour }}, 100 * time.Second},
		{"throttle fallback over the cap", throttle(modelA), modelA, []func(*Config){withMaxSeconds(30)}, 30 * time.Second},
		{"invalid maximum uses 3600", throttleFor(modelA, 1e9), modelA, []func(*Config){withMaxSeconds(0)}, 3600 * time.Second},
		{"largest maximum", throttleFor(modelA, 1e300), modelA, []func(*Config){withMaxSeconds(LargestMaxSeconds)}, LargestMaxSeconds * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mods := append([]func(*Config){withMaxSeconds(100)}, tc.mods...)
			if got := cooldownAfter(t, tc.obs, tc.scope, mods...); got != tc.want {
				t.Errorf("cooldown = %v, want %v", got, tc.want)
			}
		})
	}
}

// Spec (model-cooldown.md, Evidence and scope): "At least one second is
// retained for zero delay to prevent immediate redispatch." (1e-12 s is
// zero at the clock's resolution.)
func TestZeroDelayKeepsOneSecond(t *testing.T) {
	for _, advice := range []float64{0, 1e-12} {
		f := newFixture(t, func(c *Config) { c.Credentials = testCreds[:1] })
		f.record("a", throttleFor(modelA, advice))
		f.record("a", Observation{Scope: modelB, Status: 401, RetryAfter: advice, HasRetryAfter: true})
		f.wantExhausted(modelA, true, time.Second)
		f.wantExhausted(unscoped, false, time.Second)
		f.clk.Advance(time.Second - time.Nanosecond)
		f.wantAvailable(modelA)
		f.clk.Advance(time.Nanosecond)
		f.wantAvailable(modelA, "a")
	}
}

func TestFractionalDelayRoundsUpOnlyInRetryAfter(t *testing.T) {
	// Below a second too: "positive fractional delays round up only in
	// Retry-After"; the one second is for zero delay.
	for _, advice := range []float64{0.25, 0.999} {
		f := newFixture(t, func(c *Config) { c.Credentials = testCreds[:1] })
		d := time.Duration(advice * float64(time.Second))
		f.record("a", throttleFor(modelA, advice))
		f.record("a", Observation{Scope: modelB, Status: 401, RetryAfter: advice, HasRetryAfter: true})
		f.wantExhausted(modelA, true, d)
		f.clk.Advance(d)
		f.wantSelect(modelA, "a")
	}
	f := newFixture(t, func(c *Config) { c.Credentials = testCreds[:1] })
	f.record("a", throttleFor(modelA, 1.5))
	f.wantExhausted(modelA, true, 1500*time.Millisecond) // stored exactly
	// The answer rounds it up to Retry-After 2 (decisions'
	// TestFractionalCooldownRoundsUpOnlyInRetryAfter).
	_, err := f.pool.Select(modelA, nil)
	if ce, ok := errors.AsType[*CooldownExhaustedError](err); !ok || ce.RetryAfter != 1500*time.Millisecond {
		t.Errorf("Select = %v; want a cooldown of exactly 1.5 s", err)
	}
	f.clk.Advance(1500 * time.Millisecond) // released at 1.5 s, not 2 s
	f.wantSelect(modelA, "a")
}

func TestNewRestNeverShortensLiveOne(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Credentials = testCreds[:1] })
	f.record("a", throttleFor(modelA, 100))
	f.record("a", throttleFor(modelA, 10))
	f.record("a", throttleFor(unscoped, 100))
	f.record("a", throttleFor(unscoped, 10))
	f.wantExhausted(modelA, true, 100*time.Second)
	f.wantExhausted(unscoped, false, 100*time.Second)
}

// Success.

func TestSuccessOnModelAClearsOnlyModelA(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttle(modelA))
	f.record("a", throttle(modelB))
	f.record("a", success(modelA))
	f.wantAvailable(modelA, "a", "b", "c")
	f.wantAvailable(modelB, "b", "c")
}

func TestSuccessDoesNotClearAuthLegacyOrCapacity(t *testing.T) {
	f := newFixture(t)
	f.record("a", status(modelA, 401))       // auth observation + legacy rest
	f.record("b", throttleFor(unscoped, 30)) // legacy rest
	f.record("a", success(modelA))
	f.record("a", success(modelB))
	f.record("b", success(modelA))
	f.wantAvailable(modelA, "c")
	f.wantAvailable(modelB, "c")
	f.wantAvailable(unscoped, "c")

	g := newFixture(t, withStoreLimit(1))
	g.record("a", throttle(modelA))        // the store is full
	g.record("b", throttleFor(modelB, 90)) // dropped: 90 s capacity guard
	g.record("a", success(modelA))         // frees the slot, not the guard
	if n := g.store.Len(); n != 0 {
		t.Errorf("store.Len() = %d, want 0", n)
	}
	g.wantCapacity(modelA, 90*time.Second)
}

func TestUnscopedRecordingLeavesModelStateUnchanged(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttle(modelA))
	f.record("a", success(unscoped)) // legacy success: legacy map only
	f.record("b", throttle(unscoped))
	f.record("c", status(unscoped, 401))
	if n := f.store.Len(); n != 1 {
		t.Errorf("store.Len() = %d, want the 1 scoped observation", n)
	}
	f.wantAvailable(modelA)
	f.wantAvailable(modelB, "a")
	f.record("b", success(unscoped)) // legacy success clears the legacy rest
	f.wantAvailable(modelB, "a", "b")
}

func TestScopedAuthRejectionBlocksUnscopedSelection(t *testing.T) {
	f := newFixture(t)
	f.record("a", Observation{Scope: modelA, Status: 401, RetryAfter: 42, HasRetryAfter: true})
	f.wantAvailable(unscoped, "b", "c")
	f.wantSelect(unscoped, "b")
	snap := f.pool.Snapshot()
	want := t0.Add(42 * time.Second) // the same capped deadline in both maps
	if got := snap.Credentials[0]; !got.RestingUntil.Equal(want) || !got.AuthCoolingUntil.Equal(want) {
		t.Errorf("a = %+v, want legacy rest and auth observation until %v", got, want)
	}
}

// Catalog fetches.

func TestCatalogProbeCarriesNoModelQuotaEvidence(t *testing.T) {
	catalog := func(s Scope, code int) Observation { return Observation{Scope: s, Status: code, Catalog: true} }
	f := newFixture(t, func(c *Config) { c.Options.CatalogTTL = 45 * time.Second })
	f.record("a", catalog(modelA, 429))
	f.record("a", catalog(mini, 429))
	f.record("b", catalog(modelA, 403))
	f.record("b", Observation{Scope: modelA, Status: 401, Catalog: true, CredentialWideAuth: boolp(false)})
	f.wantAvailable(modelA, "a", "b", "c")
	f.wantAvailable(unscoped, "a", "b", "c")
	if n := f.store.Len(); n != 0 {
		t.Errorf("store.Len() = %d after catalog throttles, want 0", n)
	}
	// A catalog success clears no model observation either.
	f.record("c", throttle(modelA))
	f.record("c", catalog(modelA, 200))
	f.wantAvailable(modelA, "a", "b")
	// Only a genuine auth rejection cools: every model, and the legacy map.
	f.record("a", catalog(modelA, 401))
	for _, s := range []Scope{modelA, modelB, mini, unscoped} {
		if !f.cooling("a", s) {
			t.Errorf("a available for %+v after a catalog 401", s)
		}
	}
	if d, ok := f.pool.NextRelease(modelB, []string{"a"}); !ok || d != 45*time.Second {
		t.Errorf("catalog auth rest = %v, %v; want CatalogTTL 45s", d, ok)
	}
}

func TestUnscopedCatalogKeepsLegacyRejectionRules(t *testing.T) {
	for _, mod := range []func(*Config){func(*Config) {}, disabled} {
		f := newFixture(t, mod, func(c *Config) { c.Options.CatalogTTL = 45 * time.Second })
		f.record("a", Observation{Status: 429, Catalog: true})
		f.record("b", Observation{Status: 401, Catalog: true})
		if d, _ := f.pool.NextRelease(unscoped, []string{"a"}); d != 60*time.Second {
			t.Errorf("catalog throttle rest = %v, want 60s", d)
		}
		if d, _ := f.pool.NextRelease(unscoped, []string{"b"}); d != 45*time.Second {
			t.Errorf("catalog auth rest = %v, want 45s", d)
		}
		f.record("a", Observation{Status: 200, Catalog: true})
		f.wantAvailable(unscoped, "a", "c")
	}
}

// Robustness.

func TestRecordNeverPanics(t *testing.T) {
	f := newFixture(t, withStoreLimit(1))
	weird := []Observation{
		{},
		{Status: -1},
		{Status: 999},
		{Status: 429, RetryAfter: math.MaxFloat64, HasRetryAfter: true},
		{Status: 429, RetryAfter: -math.MaxFloat64, HasRetryAfter: true},
		{Status: 429, RetryAfter: math.SmallestNonzeroFloat64, HasRetryAfter: true},
		{Outcome: Outcome(99)},
		{Scope: Scope{QuotaBucket: "nope"}, Status: 429},
		{Scope: modelA, Status: 401, RetryAfter: math.NaN(), HasRetryAfter: true, Catalog: true},
	}
	for _, o := range weird {
		for _, n := range []string{"a", "", "unknown"} {
			f.record(n, o)
			o.Scope = modelB
			f.record(n, o)
		}
	}
	_ = f.pool.Snapshot()
}

// A success of a call sent before the throttle that cooled its credential
// (a long call in flight through it) ends no cooldown, scoped or legacy; a
// success sent after it does, and one of unknown send time does too.
func TestSuccessSentBeforeTheThrottleEndsNoCooldown(t *testing.T) {
	for _, scoped := range []bool{true, false} {
		t.Run(fmt.Sprintf("model cooldown %v", scoped), func(t *testing.T) {
			f := newFixture(t, func(c *Config) {
				c.Credentials = testCreds[:1]
				c.Settings.ModelCooldownEnabled = scoped
			})
			sentEarly := f.clk.Now()
			f.clk.Advance(time.Second)
			f.record("a", throttle(modelA))
			ok := success(modelA)
			ok.Sent = sentEarly
			f.record("a", ok)
			f.wantExhausted(modelA, scoped, ThrottleRest)
			f.clk.Advance(time.Second)
			ok.Sent = f.clk.Now() // sent after the throttle
			f.record("a", ok)
			f.wantSelect(modelA, "a")

			f.record("a", throttle(modelA))
			f.record("a", success(modelA)) // send time unknown
			f.wantSelect(modelA, "a")
		})
	}
}
