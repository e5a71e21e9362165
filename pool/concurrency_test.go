package pool

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestConcurrentSelectAndRecord runs every operation of two pools sharing a
// store from many goroutines while the clock moves; run it with -race.
func TestConcurrentSelectAndRecord(t *testing.T) {
	l := &fakeLearner{suggest: func(LearnEvent) (time.Duration, bool) { return 2 * time.Second, true }}
	f := newFixture(t, withStoreLimit(64), preferActive, withLearner(l))
	zdr := New(Config{Options: Options{Name: "zdr", FirstKeyFallback: true}, Credentials: testCreds, Store: f.store, Clock: f.clk})
	pools := []*Pool{f.pool, zdr}
	scopes := []Scope{unscoped, modelA, modelB, mini, large}
	codes := []int{200, 401, 403, 429, 500}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				f.clk.Advance(100 * time.Millisecond)
			}
		}
	})
	var workers sync.WaitGroup
	for g := range 32 {
		workers.Go(func() {
			for i := range 300 {
				p := pools[(g+i)%len(pools)]
				s := scopes[(g*7+i)%len(scopes)]
				if i%17 == 0 {
					s = Scope{Model: fmt.Sprintf("m%d-%d", g, i)} // fills the store
				}
				c, err := p.Select(s, nil)
				if err != nil {
					if !errors.As(err, new(*CooldownExhaustedError)) && !errors.As(err, new(*CapacityError)) {
						t.Errorf("Select = %v", err)
						return
					}
					c = testCreds[i%len(testCreds)]
				}
				p.Record(c.Name, Observation{
					Scope: s, Status: codes[(g+i)%len(codes)],
					RetryAfter: float64(i % 5), HasRetryAfter: i%2 == 0,
					Catalog: i%11 == 0,
				})
				switch i % 5 {
				case 0:
					p.Available(s, []string{"c", "a"})
				case 1:
					p.NextRelease(s, nil)
				case 2:
					p.Snapshot()
				case 3:
					if n := f.store.Len(); n > 64 {
						t.Errorf("store.Len() = %d over its limit", n)
					}
				}
			}
		})
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	if n := f.store.Len(); n > 64 {
		t.Errorf("store.Len() = %d over its limit", n)
	}
}

// TestCapacityUnderConcurrency fills the store and then selects and records
// from 8 goroutines: new scoped admission fails closed with 503, known
// all-cooling scopes still get 429, and no live observation is evicted.
func TestCapacityUnderConcurrency(t *testing.T) {
	f := newFixture(t, quiet, func(c *Config) { c.Credentials = testCreds[:1] })
	fill(f, "a", DefaultStoreLimit, 3600)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				fresh := Scope{Model: fmt.Sprintf("fresh-%d-%d", g, i)}
				f.record("a", throttleFor(fresh, 30)) // dropped: raises the guard
				_, err := f.pool.Select(fresh, nil)
				if ce, ok := errors.AsType[*CapacityError](err); !ok || ce.RetryAfter <= 0 || ce.RetryAfter > 30*time.Second {
					t.Errorf("Select(fresh) = %v, want *CapacityError within 30 s", err)
					return
				}
				known := Scope{Model: fmt.Sprintf("m%05d", (g*200+i)%DefaultStoreLimit)}
				if _, err := f.pool.Select(known, nil); !errors.As(err, new(*CooldownExhaustedError)) {
					t.Errorf("Select(known) = %v, want *CooldownExhaustedError", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := f.store.Len(); n != DefaultStoreLimit {
		t.Errorf("Len = %d, want %d: live observations were evicted", n, DefaultStoreLimit)
	}
}
