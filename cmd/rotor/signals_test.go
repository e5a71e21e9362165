package main

import (
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// README: the first SIGINT or SIGTERM drains, a second exits at once. A
// command run under timeout(1) gets its SIGTERM twice at once (to the
// command, then to its process group): that is still the first, or the
// drain would be skipped at random. The same signal again after the
// window, or another signal at once, is a second one.
func TestSecondSignalButNotTimeoutsRepeat(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name  string
		sigs  []os.Signal
		after []time.Duration // each signal's time after the first
		want  os.Signal       // the signal that exits, nil for none
	}{
		{"timeout's two SIGTERMs drain", []os.Signal{syscall.SIGTERM, syscall.SIGTERM}, []time.Duration{0, time.Millisecond}, nil},
		{"a SIGTERM after the window exits", []os.Signal{syscall.SIGTERM, syscall.SIGTERM, syscall.SIGTERM}, []time.Duration{0, time.Millisecond, repeatWindow}, syscall.SIGTERM},
		{"a second Ctrl-C exits", []os.Signal{syscall.SIGINT, syscall.SIGINT}, []time.Duration{0, time.Second}, syscall.SIGINT},
		{"another signal at once exits", []os.Signal{syscall.SIGTERM, syscall.SIGINT}, []time.Duration{0, 0}, syscall.SIGINT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The watcher reads the clock once for each signal it takes,
			// in order: the clock answers each signal's time.
			var calls atomic.Int32
			now := func() time.Time { return start.Add(tt.after[calls.Add(1)-1]) }
			sigs := make(chan os.Signal)
			done := make(chan struct{})
			var cancelled atomic.Int32
			exited := make(chan os.Signal, 1)
			returned := make(chan struct{})
			go func() {
				watchSignals(sigs, done, func() { cancelled.Add(1) }, now, func(s os.Signal) { exited <- s })
				close(returned)
			}()
			for i, s := range tt.sigs {
				select {
				case sigs <- s:
				case <-returned:
					t.Fatalf("stopped watching before signal %d", i+1)
				}
			}
			close(done)
			<-returned
			var got os.Signal
			select {
			case got = <-exited:
			default:
			}
			if got != tt.want {
				t.Errorf("exited on %v, want %v", got, tt.want)
			}
			if n := cancelled.Load(); n != 1 {
				t.Errorf("cancel called %d times, want once", n)
			}
		})
	}
}
