package pool

import (
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/rotorhq/rotor/internal/clock"
)

// Run with: go test -run XXX -bench . -count 5 ./pool/
//
// Select and Record are measured with 10 and with 10,000 live
// observations in the shared store, from 16 goroutines. The store's limit
// is 20,000 here so that the benchmarks' own observations never hit the
// capacity guard (which would measure the 503 path instead).

const benchGoroutines = 16

var benchLive = []int{10, 10000}

// benchPool returns a pool of four credentials and a store holding live
// observations of another pool, each cooling for an hour on the real clock.
func benchPool(b *testing.B, live int) *Pool {
	b.Helper()
	st := NewStore(clock.Real(), 2*DefaultStoreLimit)
	cfg := Config{
		Options:     Options{Name: "api", PreferActive: true},
		Credentials: testCreds,
		Settings:    Settings{ModelCooldownEnabled: true, MaxSeconds: 3600},
		Store:       st,
	}
	p := New(cfg)
	cfg.Options.Name = "filler"
	filler := New(cfg)
	for i := range live {
		filler.Record(testCreds[i%len(testCreds)].Name, throttleFor(Scope{Model: "filler-" + strconv.Itoa(i)}, 3600))
	}
	if n := st.Len(); n != live {
		b.Fatalf("store holds %d, want %d", n, live)
	}
	return p
}

func setParallelism(b *testing.B) {
	b.SetParallelism((benchGoroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
}

// BenchmarkSelect selects among three credentials, one of them cooling, for
// a rotating set of models.
func BenchmarkSelect(b *testing.B) {
	for _, live := range benchLive {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			p := benchPool(b, live)
			scopes := make([]Scope, 8)
			for i := range scopes {
				scopes[i] = Scope{Model: "bench-" + strconv.Itoa(i)}
				p.Record("a", throttleFor(scopes[i], 3600))
			}
			setParallelism(b)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := p.Select(scopes[i%len(scopes)], nil); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}

// BenchmarkRecord records throttles and successes alternately, each
// goroutine on its own models, so that the live count stays steady.
func BenchmarkRecord(b *testing.B) {
	for _, live := range benchLive {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			p := benchPool(b, live)
			var next atomic.Int32
			setParallelism(b)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				g := int(next.Add(1))
				scopes := make([]Scope, 4)
				for i := range scopes {
					scopes[i] = Scope{Model: fmt.Sprintf("bench-%d-%d", g, i)}
				}
				throttles, successes := make([]Observation, 4), make([]Observation, 4)
				for i, s := range scopes {
					throttles[i], successes[i] = throttleFor(s, 30), success(s)
				}
				i := 0
				for pb.Next() {
					name := testCreds[i%len(testCreds)].Name
					if i&1 == 0 {
						p.Record(name, throttles[(i>>1)%4])
					} else {
						p.Record(name, successes[(i>>1)%4])
					}
					i++
				}
			})
		})
	}
}

// BenchmarkStoreHeap reports the heap held by a store with 10,000 live
// observations, in MiB (target: under 4).
func BenchmarkStoreHeap(b *testing.B) {
	models := make([]Scope, DefaultStoreLimit)
	for i := range models {
		models[i] = Scope{Model: "model-" + strconv.Itoa(i)}
	}
	var held float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		st := NewStore(clock.Real(), 0)
		p := New(Config{Options: Options{Name: "api"}, Credentials: testCreds, Settings: Settings{ModelCooldownEnabled: true}, Store: st})
		for i, s := range models {
			p.Record(testCreds[i%len(testCreds)].Name, throttleFor(s, 3600))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if n := st.Len(); n != DefaultStoreLimit {
			b.Fatalf("store holds %d", n)
		}
		held = float64(after.HeapAlloc) - float64(before.HeapAlloc)
		runtime.KeepAlive(p)
	}
	b.ReportMetric(held/(1<<20), "MiB/10k-obs")
	b.ReportMetric(held/DefaultStoreLimit, "B/obs")
}
