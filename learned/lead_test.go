package learned

import "testing"

// TestAdaptRoundLeadLooksForFall: the lead of a round of throttles, held
// long on agreeing evidence, finds a reset that fell into the lower half
// of what lies below its evidence's lower bound sooner, on average over
// that range, than the same credential not leading a round; not where the
// lower bound is short (under leadMinCooldowns existing cooldowns), the
// ring already holds a reset below half of it, or the resets look drawn
// anew.
func TestAdaptRoundLeadLooksForFall(t *testing.T) {
	const t0 = int64(1_767_225_600_000)
	const existing = 60_000
	o := observation{throttle: true, at: t0, hint: -1, existing: existing}
	first := func(st state, lead bool) (int64, bool) {
		st.anchor = o.at
		w, _, ok := st.adaptTarget(o, lead)
		if !ok {
			t.Fatal("no plan")
		}
		return w, st.aflags&flagLead != 0
	}
	// found returns the mean wait at which the episode's retries, each
	// refused until one reaches R, find R over R in (lo, hi].
	found := func(st state, lead bool, lo, hi int64) float64 {
		st.anchor = o.at
		w, _, _ := st.adaptTarget(o, lead)
		var seq []int64
		for len(seq) < 16 && (len(seq) == 0 || seq[len(seq)-1] < hi) {
			seq = append(seq, w)
			st.elo, st.fails = w, st.fails+1
			w = st.planNext(w, existing)
		}
		var sum, n float64
		for r := lo + 1_000; r <= hi; r += 1_000 {
			for _, x := range seq {
				if x >= r {
					sum += float64(x)
					n++
					break
				}
			}
		}
		return sum / n
	}
	held := func(lo, hi int64) state {
		st := newState()
		for range adaptRing {
			st.push(span{lo: lo, hi: hi})
		}
		st.credit = adaptCreditCap
		return st
	}
	st := held(590_000, 600_000)
	if _, flagged := first(st, false); flagged {
		t.Fatal("an episode that does not lead a round is flagged as a lead")
	}
	if _, flagged := first(st, true); !flagged {
		t.Fatal("held at 600 s, the lead does not look for a fall")
	}
	top := leadPiece(existing, 590_000).hi
	if lead, alone := found(st, true, existing, top), found(st, false, existing, top); lead >= alone {
		t.Errorf("held at 600 s, a reset fallen to (60 s, %d ms] is found at %.0f ms on average by the lead, %.0f ms alone; want sooner", top, lead, alone)
	}
	short := held(190_000, 200_000)
	if _, flagged := first(short, true); flagged {
		t.Error("held at 200 s, under five existing cooldowns, the lead still looks for a fall")
	}
	seen := held(590_000, 600_000)
	seen.push(span{lo: 200_000, hi: 250_000})
	for range 2 {
		seen.push(span{lo: 590_000, hi: 600_000})
	}
	if _, flagged := first(seen, true); flagged {
		t.Error("with a reset below half the bound in the ring, the lead still looks for a fall")
	}
	anew := newState()
	for i := range adaptRing {
		lo := int64(300_000 + 300_000*(i%2) + 7_000*i)
		anew.push(span{lo: lo, hi: lo + 20_000})
	}
	anew.credit = adaptCreditCap
	if d := anew.drawnAnew(); d < leadAnew {
		t.Fatalf("the alternating ring's drawnAnew is %.2f, want at least %.2f: the case shows nothing", d, leadAnew)
	}
	if _, flagged := first(anew, true); flagged {
		t.Error("where the resets look drawn anew, the lead still looks for a fall")
	}
}

// TestLeadsRound: an episode leads its group's round when no sibling's
// episode began within leadWindow before it; its own earlier episode and
// another group's do not count.
func TestLeadsRound(t *testing.T) {
	l := New(Config{Mode: ModeApply, Adapt: true})
	const t0 = int64(1_767_225_600_000)
	steps := []struct {
		g    uint64
		at   int64
		id   string
		want bool
	}{
		{1, t0, "a", true},
		{1, t0 + 2*60_000, "b", false},             // a began 2 min before
		{1, t0 + 3*60_000, "a", false},             // b began 1 min before
		{2, t0 + 3*60_000, "c", true},              // another group
		{1, t0 + 3*60_000 + leadWindow, "a", true}, // b began 6 min before; a's own start does not count
	}
	for i, s := range steps {
		if got := l.leadsRound(s.g, s.at, s.id); got != s.want {
			t.Errorf("step %d (%s at +%d ms): lead %v, want %v", i, s.id, s.at-t0, got, s.want)
		}
	}
}
