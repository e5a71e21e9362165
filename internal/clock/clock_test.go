package clock

import (
	"context"
	"testing"
	"time"
)

func TestFakeTimerFiresOnlyWhenDue(t *testing.T) {
	f := NewFake(time.Unix(1000, 0))
	tm := f.NewTimer(10 * time.Second)
	f.Advance(9 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("timer fired 1s early")
	default:
	}
	f.Advance(time.Second)
	select {
	case got := <-tm.C():
		if want := time.Unix(1010, 0); !got.Equal(want) {
			t.Errorf("fired at %v, want %v", got, want)
		}
	default:
		t.Fatal("timer did not fire when due")
	}
	if f.Timers() != 0 {
		t.Errorf("Timers() = %d after firing, want 0", f.Timers())
	}
}

func TestFakeStopRemovesTimer(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	tm := f.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop() = false for a pending timer")
	}
	f.Advance(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("stopped timer fired")
	default:
	}
}

func TestSleepReturnsContextError(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, f, time.Hour); err != context.Canceled {
		t.Errorf("Sleep on cancelled ctx = %v, want context.Canceled", err)
	}
}

func TestSleepWakesOnAdvance(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	done := make(chan error)
	go func() { done <- Sleep(context.Background(), f, time.Minute) }()
	for f.Timers() == 0 {
		time.Sleep(time.Millisecond)
	}
	f.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Errorf("Sleep = %v, want nil", err)
	}
}

func TestAfterFunc(t *testing.T) {
	for _, c := range []struct {
		name string
		clk  func() Clock
	}{
		{"real", Real},
		{"fake", func() Clock { return NewFake(time.Unix(0, 0)) }},
	} {
		t.Run(c.name+"/fires", func(t *testing.T) {
			clk := c.clk()
			called := make(chan struct{})
			start := time.Now()
			stop := AfterFunc(clk, 20*time.Millisecond, func() { close(called) })
			if f, ok := clk.(*Fake); ok {
				if n := f.Timers(); n != 1 {
					t.Fatalf("Timers() = %d when AfterFunc returned, want 1", n)
				}
				f.Advance(20 * time.Millisecond)
			}
			select {
			case <-called:
			case <-time.After(10 * time.Second):
				t.Fatal("f was not called")
			}
			if _, ok := clk.(realClock); ok && time.Since(start) < 20*time.Millisecond {
				t.Errorf("f called after %v, before d", time.Since(start))
			}
			if stop() {
				t.Error("stop() = true after f ran")
			}
		})
		t.Run(c.name+"/stopped", func(t *testing.T) {
			clk := c.clk()
			called := make(chan struct{})
			stop := AfterFunc(clk, time.Hour, func() { close(called) })
			if !stop() {
				t.Fatal("stop() = false for a pending call")
			}
			if stop() {
				t.Error("a second stop() = true")
			}
			if f, ok := clk.(*Fake); ok {
				if n := f.Timers(); n != 0 {
					t.Errorf("Timers() = %d after stop, want 0", n)
				}
				f.Advance(2 * time.Hour)
				select {
				case <-called:
					t.Error("f called after stop")
				default:
				}
			}
		})
	}
}
