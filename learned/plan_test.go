package learned

import (
	"math"
	"slices"
	"testing"
)

// testPieces is a belief with weight below, inside and between the
// candidate retries.
var testPieces = []piece{{0, 100_000, 0.5}, {150_000, 200_000, 0.3}, {30_000, 40_000, 0.2}}

// TestPlanTabulatesTheBelief: F and M at each point are the weight of R
// at or below it and the weighted sum of those R, as a fine Riemann sum
// of the pieces gives them.
func TestPlanTabulatesTheBelief(t *testing.T) {
	g := []int64{35_000, 100_000, 160_000, 200_000}
	pl := newPlan(testPieces, g, 10_000)
	for i, x := range append([]int64{10_000}, g...) {
		var f, m float64
		for _, p := range testPieces {
			const steps = 20_000
			d := float64(p.hi-p.lo) / steps
			for k := range steps {
				if r := float64(p.lo) + (float64(k)+0.5)*d; r <= float64(x) {
					f += p.w / steps
					m += p.w / steps * r
				}
			}
		}
		if math.Abs(pl.f[i]-f) > 1e-3 || math.Abs(pl.m[i]-m) > 5 {
			t.Errorf("at %d: F %.4f M %.1f, want %.4f %.1f", x, pl.f[i], pl.m[i], f, m)
		}
	}
	if math.Abs(pl.total-1) > 1e-12 {
		t.Errorf("total %v, want 1", pl.total)
	}
}

// TestPlanFirstIsOptimal: the dynamic programme's first retry begins the
// cheapest of all retry sequences over the candidates (expected idle time
// plus lambda per expected refusal, by brute force), and the refusals it
// reports are that sequence's.
func TestPlanFirstIsOptimal(t *testing.T) {
	g := []int64{20_000, 35_000, 40_000, 60_000, 80_000, 100_000, 150_000, 175_000, 200_000}
	for _, e := range []int64{0, 35_000, 100_000} {
		for _, lam := range []float64{100, 1_000, 5_000, 20_000, 80_000, 1e6} {
			var after []int64
			for _, x := range g {
				if x > e {
					after = append(after, x)
				}
			}
			pl := newPlan(testPieces, after, e)
			above := pl.total - pl.f[0]
			// Every sequence ends at the last candidate, where no weight
			// is left. Ties are allowed: the first retry must begin some
			// cheapest sequence, with that sequence's refusals.
			type seqCost struct{ cost, ref float64 }
			best := math.Inf(1)
			var all []struct {
				first int64
				seqCost
			}
			n := len(after)
			for mask := 0; mask < 1<<(n-1); mask++ {
				seq := []int{}
				for i := range n - 1 {
					if mask&(1<<i) != 0 {
						seq = append(seq, i+1)
					}
				}
				seq = append(seq, n)
				cost, ref, prev := 0.0, 0.0, 0
				for _, i := range seq {
					cost += float64(after[i-1])*(pl.f[i]-pl.f[prev]) - (pl.m[i] - pl.m[prev])
					u := max(pl.total-pl.f[i], 0)
					cost += lam * u
					ref += u / above
					prev = i
				}
				best = min(best, cost)
				all = append(all, struct {
					first int64
					seqCost
				}{after[seq[0]-1], seqCost{cost, ref}})
			}
			got, ref := pl.first(lam)
			ok := false
			for _, c := range all {
				if c.first == got && c.cost <= best+1e-6 && math.Abs(c.ref-ref) < 1e-9 {
					ok = true
				}
			}
			if !ok {
				t.Errorf("after %d, lambda %v: first %d with %.3f refusals begins no cheapest sequence (cost %.1f)", e, lam, got, ref, best)
			}
		}
	}
}

// TestPlanCheapestKeepsTheBudget: the least lambda whose plan expects at
// most the budget's refusals; a dearer refusal never plans an earlier
// retry or more refusals; no weight beyond the start plans nothing.
func TestPlanCheapestKeepsTheBudget(t *testing.T) {
	pl := newPlan(testPieces, planGrid(testPieces, 0, 100_000, 0), 0)
	prevT, prevR := int64(0), math.Inf(1)
	for l := range adaptMaxLam + 1 {
		tt, r := pl.first(lambda(l))
		if tt < prevT || r > prevR+1e-9 {
			t.Errorf("lam %d: first %d with %.3f refusals after %d with %.3f", l, tt, r, prevT, prevR)
		}
		prevT, prevR = tt, r
	}
	for _, budget := range []float64{0, 0.3, 1, 2, 10} {
		tt, lam := pl.cheapest(budget)
		want, r := pl.first(lambda(int(lam)))
		if tt != want || lam < adaptMaxLam && r > budget {
			t.Errorf("budget %v: first %d at lam %d (%.3f refusals)", budget, tt, lam, r)
		}
		if lam > 0 {
			if _, r := pl.first(lambda(int(lam) - 1)); r <= budget {
				t.Errorf("budget %v: lam %d, but lam %d expects %.3f refusals", budget, lam, lam-1, r)
			}
		}
	}
	if tt, r := newPlan(testPieces, nil, 200_000).first(1000); tt != 200_000 || r != 0 {
		t.Errorf("nothing beyond 200000: %d, %v", tt, r)
	}
}

// BenchmarkAdaptTarget: one episode's first plan with a full, disagreeing
// ring (the dearest case: the lambda search runs the programme up to 15
// times).
func BenchmarkAdaptTarget(b *testing.B) {
	const t0 = int64(1_767_225_600_000)
	st := newState()
	for i := range adaptRing {
		lo := int64(100_000 + 13_000*i)
		st.push(span{lo: lo, hi: lo + 20_000})
	}
	o := observation{throttle: true, at: t0, hint: -1, existing: 60_000}
	for b.Loop() {
		s := st
		s.anchor = o.at
		s.adaptTarget(o, false)
	}
}

// TestPlanKeepsTrialsClearOfAHeldExistingCooldown: while the held wait is
// no longer than the existing cooldown, no retry is planned in the last
// eighth below it (a natural request taken late and refused in its last
// second would hold the credential past the reset, as a retry at the
// held wait never does); above the existing cooldown, retries may come
// anywhere below the held wait.
func TestPlanKeepsTrialsClearOfAHeldExistingCooldown(t *testing.T) {
	const existing = 60_000
	for _, ev := range []span{{0, 60_000}, {41_251, 60_000}, {50_000, 60_000}, {54_907, 60_000}, {20_000, 45_000}} {
		for _, credit := range []uint8{0, 16, 64, adaptCreditCap} {
			// The first episode proved R <= 60 s; later ones narrowed it.
			st := newState()
			st.push(span{0, 60_000})
			st.push(ev)
			st.credit = credit
			t1, h := st.planFirst(existing)
			if h > existing {
				t.Fatalf("evidence %v: held %d, want at most the existing cooldown", ev, h)
			}
			if t1 < h && t1 > h-h/8 {
				t.Errorf("evidence %v, credit %d: first retry %d within an eighth below the held %d", ev, credit, t1, h)
			}
			for e := ev.lo + 1_000; e < h; e += 1_000 {
				if n := st.planAfter(e, existing); n < h && n > h-h/8 {
					t.Errorf("evidence %v, credit %d: after a refusal at %d the retry %d is within an eighth below the held %d", ev, credit, e, n, h)
				}
			}
		}
	}
	// A piece ending 10 s below a held 200 s: a candidate while the held
	// wait is longer than the existing cooldown, none when it is the
	// existing cooldown.
	ps := []piece{{0, 190_000, 0.5}, {190_000, 200_000, 0.5}}
	if g := planGrid(ps, 0, 200_000, trialGap(200_000, 60_000)); !slices.Contains(g, 190_000) {
		t.Errorf("held 200 s above an existing 60 s: grid %v lacks 190 s", g)
	}
	if g := planGrid(ps, 0, 200_000, trialGap(200_000, 200_000)); slices.Contains(g, 190_000) || !slices.Contains(g, 200_000) {
		t.Errorf("held 200 s at the existing cooldown: grid %v, want 200 s and nothing in (175 s, 200 s)", g)
	}
	// A short held wait keeps at least 4 s clear, not just an eighth.
	short := []piece{{0, 15_000, 0.4}, {15_000, 17_000, 0.3}, {17_000, 20_000, 0.3}}
	if g := planGrid(short, 0, 20_000, trialGap(20_000, 60_000)); slices.Contains(g, 17_000) || !slices.Contains(g, 15_000) {
		t.Errorf("held 20 s under an existing 60 s: grid %v, want 15 s and nothing in (16 s, 20 s)", g)
	}
}
