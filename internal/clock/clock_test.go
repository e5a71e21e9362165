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
