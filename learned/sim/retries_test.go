package sim

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/quotasim"
	"github.com/rotorhq/rotor/pool"
)

func TestParseRetries(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []time.Duration
	}{
		{"145,175,195,200", []time.Duration{145 * time.Second, 175 * time.Second, 195 * time.Second, 200 * time.Second}},
		{" 1.5 , 3", []time.Duration{1500 * time.Millisecond, 3 * time.Second}},
		{"3600", []time.Duration{time.Hour}},
	} {
		got, err := ParseRetries(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseRetries(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "0", "-5", "x", "200,100", "100,100", "3601", "NaN", "1,,2", "Inf", "1e-300"} {
		if _, err := ParseRetries(bad); !errors.Is(err, ErrRetries) {
			t.Errorf("ParseRetries(%q) = %v, want ErrRetries", bad, err)
		}
	}
}

// Each episode retries at the told times after its first throttle, then
// at the existing cooldown; a success ends the episode, and identities
// keep their own episodes. Trusted advice is still a minimum.
func TestRetriesCooldowns(t *testing.T) {
	at, err := ParseRetries("100,140,160")
	if err != nil {
		t.Fatal(err)
	}
	l := Retries(at).Learner(nil)
	t0 := epoch
	throttle := func(id string, after time.Duration) (time.Duration, bool) {
		return l.Suggest(pool.LearnEvent{Identity: id, Outcome: pool.OutcomeThrottled, At: t0.Add(after)})
	}
	for _, c := range []struct {
		id    string
		after time.Duration
		want  time.Duration // 0: the existing cooldown
	}{
		{"a", 0, 100 * time.Second},
		{"b", 30 * time.Second, 100 * time.Second}, // b's own episode
		{"a", 100500 * time.Millisecond, 39500 * time.Millisecond},
		{"a", 140 * time.Second, 20 * time.Second},
		{"a", 161 * time.Second, 0},
		{"b", 130 * time.Second, 40 * time.Second},
	} {
		d, ok := throttle(c.id, c.after)
		if ok != (c.want > 0) || d != c.want {
			t.Errorf("%s's throttle at %v: %v, %v; want %v (0: the existing cooldown)", c.id, c.after, d, ok, c.want)
		}
	}
	l.Observe(pool.LearnEvent{Identity: "a", Outcome: pool.OutcomeSuccess, At: t0.Add(200 * time.Second)})
	if d, ok := throttle("a", 300*time.Second); !ok || d != 100*time.Second {
		t.Errorf("a's first throttle after a success: %v, %v; want a new episode's 100s", d, ok)
	}
	d, ok := l.Suggest(pool.LearnEvent{Identity: "c", Outcome: pool.OutcomeThrottled, At: t0, RetryAfter: 120, HasRetryAfter: true})
	if !ok || d != 120*time.Second {
		t.Errorf("with trusted advice of 120 s: %v, %v; want 120s", d, ok)
	}
}

// Through the real pool, at a reset of 150 s, retries at 100, 140 and
// 160 s waste two refusals an episode and idle about 10 s (the next
// natural request comes within a second at 5 req/s).
func TestRetriesThroughThePool(t *testing.T) {
	sc, err := ParseSchedule("0:150")
	if err != nil {
		t.Fatal(err)
	}
	at, err := ParseRetries("100,140,160")
	if err != nil {
		t.Fatal(err)
	}
	r := Run(sc, 5, Retries(at), Options{Span: 2 * time.Hour, Seed: 1, Failover: true})
	var ended quotasim.Episodes
	for _, e := range r.ByRun {
		ended.Add(e)
	}
	if ended.Ended < 10 {
		t.Fatalf("%d episodes ended, want a dozen or more", ended.Ended)
	}
	if ended.Wasted != 2*ended.Ended {
		t.Errorf("%d refusals wasted in %d episodes, want 2 each", ended.Wasted, ended.Ended)
	}
	if per := ended.Idle / time.Duration(ended.Ended); per < 10*time.Second || per > 12*time.Second {
		t.Errorf("idle %v per episode, want 10-12 s", per)
	}
}
