package learned

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/pool"
)

// A shared ledger may hold any bytes under an identity; a hostile or buggy
// writer computes the CRC too. Such a record is refused as corrupt (and
// replaced) unless every field is one rotor writes, so that no wait it
// plans breaks a bound.

// TestDecodeRefusesOutOfRangeAdaptFields: a shared ledger's record
// with a right CRC but adapt fields no rotor writes is corrupt (replaced),
// never trusted. Without the rhead check, push indexes ring[8] and the
// next recovery panics (the pool recovers it, and the identity stops
// learning); without the credit check the refusal budget exceeds its cap.
func TestDecodeRefusesOutOfRangeAdaptFields(t *testing.T) {
	base := writtenState()
	if _, err := decodeState(base.encode()); err != nil {
		t.Fatalf("base state refused: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*state)
	}{
		{"rhead past the ring", func(s *state) { s.rhead += adaptRing }},
		{"rn past the ring", func(s *state) { s.rn = adaptRing + 1 }},
		{"credit past its cap", func(s *state) { s.credit = adaptCreditCap + 1 }},
		{"unknown flag", func(s *state) { s.aflags = 0x80 }},
		{"lam past its cap", func(s *state) { s.lam = adaptMaxLam + 1 }},
		{"elo past the range", func(s *state) { s.elo = maxBoundMS }},
		{"span past the range", func(s *state) { s.ring[(int(s.rhead)+adaptRing-1)%adaptRing].hi = maxBoundMS + 1 }},
		{"span beyond rn", func(s *state) { s.ring[5] = span{1, 2} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := base
			c.edit(&s)
			if _, err := decodeState(s.encode()); !errors.Is(err, errStateCorrupt) {
				t.Errorf("decodeState = %v, want errStateCorrupt", err)
			}
		})
	}
}

// TestDecodeRefusesSubSecondRecovery: no rotor records a recovery
// less than a second after an episode's first throttle (every first
// cooldown is at least 1 s), so such evidence in a stored record is
// corrupt. Trusted, it plans a first retry under a second (see
// TestHostileSpanSubSecondFirstWait).
func TestDecodeRefusesSubSecondRecovery(t *testing.T) {
	s := state{lo: 61_000, hi: 180_500, conf: 3, credit: 64, budgetAt: 1}
	s.push(span{0, 500})
	if _, err := decodeState(s.encode()); !errors.Is(err, errStateCorrupt) {
		t.Errorf("a recovery 0.5 s after the first throttle: decodeState = %v, want errStateCorrupt", err)
	}
}

// TestHostileSpanSubSecondFirstWait: a shared ledger record that is
// well formed (right length, right CRC) but holds adapt evidence no rotor
// writes (a recovery 0.5 s after the first throttle, though no wait is
// under 1 s) makes the next episode's first throttle rest under a second.
func TestHostileSpanSubSecondFirstWait(t *testing.T) {
	h := newHarness(t, ModeApply, withAdapt())
	h.becomeConfident(0)
	ctx := context.Background()
	rec, _, _ := h.store.Get(ctx, h.ev.Identity, h.clk.Now())
	st, err := decodeState(rec.State)
	if err != nil {
		t.Fatal(err)
	}
	st.ring = [adaptRing]span{}
	st.rn, st.rhead = 0, 0
	for range adaptRing {
		st.push(span{lo: 0, hi: 500})
	}
	st.credit = adaptCreditCap
	b := st.encode()
	if _, err := decodeState(b); err == nil {
		t.Error("decodeState accepted a recovery 0.5 s after the first throttle")
	}
	if _, err := h.store.Put(ctx, Record{ID: rec.ID, State: b}, rec.Revision, h.clk.Now()); err != nil {
		t.Fatal(err)
	}
	d, ok := h.throttle(time.Hour)
	if ok && d < time.Second {
		t.Fatalf("first throttle of an episode rests %v (< 1 s): immediate redispatch from hostile ledger bytes", d)
	}
}

// capturing records the identities the pool hands its learner.
type capturing struct {
	*Learner
	ids []string
}

func (c *capturing) Observe(ev pool.LearnEvent) {
	c.ids = append(c.ids, ev.Identity)
	c.Learner.Observe(ev)
}

// TestPoolHostileRecordRestsUnderASecond: what a user sees. A learned
// record in a shared ledger, well formed but with evidence no rotor
// writes, makes the pool cool a credential for 0.1 s after a throttle
// without advice (the existing cooldown is 60 s, and zero advice gets at
// least a second): the request walk sends to it again at once.
func TestPoolHostileRecordRestsUnderASecond(t *testing.T) {
	clk := clock.NewFake(epoch)
	store := NewMemoryStore(0)
	l := &capturing{Learner: New(Config{Mode: ModeApply, Adapt: true, Store: store, Clock: clk,
		Policy: mustPolicy(t, `{"buckets":[{"provider":"api","model":"m1","quota_bucket":null}]}`)})}
	p := pool.New(pool.Config{
		Options:     pool.Options{Name: "api"},
		Credentials: []pool.Credential{{Name: "a", Key: secret.New("sk-audit-a-0123456789abcdef")}},
		Settings:    pool.Settings{ModelCooldownEnabled: true, MaxSeconds: 1800},
		Store:       pool.NewStore(clk, 0),
		Clock:       clk,
		Learner:     l,
	})
	scope := pool.Scope{Model: "m1"}
	// One ordinary episode: a throttle and a recovery 60 s later.
	p.Record("a", pool.Observation{Scope: scope, Status: 429})
	clk.Advance(time.Minute)
	p.Record("a", pool.Observation{Scope: scope, Status: 200})
	id := l.ids[0]
	// Another process sharing the ledger rewrote the record.
	rec, ok, _ := store.Get(context.Background(), id, clk.Now())
	if !ok {
		t.Fatal("no learned record")
	}
	st, err := decodeState(rec.State)
	if err != nil {
		t.Fatal(err)
	}
	st.ring, st.rn, st.rhead = [adaptRing]span{}, 0, 0
	for range adaptRing {
		st.push(span{0, 500})
	}
	st.credit = adaptCreditCap
	if _, err := store.Put(context.Background(), Record{ID: id, State: st.encode()}, rec.Revision, clk.Now()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	p.Record("a", pool.Observation{Scope: scope, Status: 429})
	if d, ok := p.NextRelease(scope, nil); ok && d < time.Second {
		t.Fatalf("after a throttle without advice the credential cools %v; the existing cooldown is 60 s and no rest is under 1 s", d)
	}
}

// writtenState is a state as rotor writes one with adapt on: interval
// evidence, confidence, steps, credit and two spans in its ring.
func writtenState() state {
	s := state{lo: 61_000, hi: 180_500, conf: 3, steps: 4, credit: 64, budgetAt: 1}
	s.push(span{60_000, 120_000})
	s.push(span{100_000, 150_000})
	return s
}
