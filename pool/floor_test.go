package pool

import (
	"testing"
	"time"
)

// Trusted advice is a hard minimum (learned-cooldown spec): a throttle
// renewed without advice keeps the advice of the one before it, so a
// sibling's fall cannot release the credential before it runs out.
func TestSiblingReleaseKeepsAdviceOfAnEarlierThrottle(t *testing.T) {
	long := func(LearnEvent) (time.Duration, bool) { return 300 * time.Second, true }
	l := &siblingLearner{fakeLearner: fakeLearner{suggest: long}, fell: true, rest: 5 * time.Second}
	f := newFixture(t, withLearner(l))
	f.record("b", throttleFor(modelA, 1800))
	f.clk.Advance(time.Second)
	f.record("b", throttle(modelA)) // renewed, no advice this time
	f.clk.Advance(9 * time.Second)
	f.record("a", success(modelA))
	if len(l.released) == 0 {
		t.Fatal("the learner was not asked to release b")
	}
	f.clk.Advance(1790*time.Second - time.Millisecond)
	if !f.cooling("b", modelA) {
		t.Error("b released before the 1800 s of trusted advice of its first throttle ran out")
	}
}

// "At least one second is retained for zero delay to prevent immediate
// redispatch" (model-cooldown spec), also when a sibling's fall releases
// the credential.
func TestSiblingReleaseKeepsOneSecondForZeroAdvice(t *testing.T) {
	long := func(LearnEvent) (time.Duration, bool) { return 300 * time.Second, true }
	l := &siblingLearner{fakeLearner: fakeLearner{suggest: long}, fell: true, rest: 0}
	f := newFixture(t, withLearner(l))
	f.record("b", throttleFor(modelA, 0))
	f.record("a", success(modelA))
	if len(l.released) == 0 {
		t.Fatal("the learner was not asked to release b")
	}
	if !f.cooling("b", modelA) {
		t.Error("b released at once after zero advice; want at least one second")
	}
	f.clk.Advance(time.Second)
	if f.cooling("b", modelA) {
		t.Error("b still cooling one second after zero advice and a sibling's fall")
	}
}

// A success sent before the cooldown it would clear began clears nothing
// (rotor's Observation.Sent, under "success clears only its model/bucket
// observation"): a throttle renewed while a long call was in flight keeps
// its cooldown when that call's success arrives.
func TestSuccessSentBeforeARenewedThrottleClearsNothing(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttle(modelA))
	f.clk.Advance(time.Second)
	sent := f.clk.Now() // a long call goes out
	f.clk.Advance(time.Second)
	f.record("a", throttle(modelA)) // renewed while it is in flight
	f.record("a", Observation{Scope: modelA, Status: 200, Sent: sent})
	if !f.cooling("a", modelA) {
		t.Error("a success sent before the renewed throttle ended its cooldown")
	}
}
