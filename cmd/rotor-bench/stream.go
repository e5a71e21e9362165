package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// heldStreams is rotor's memory while stalled streams are open through it.
type heldStreams struct {
	n          int
	rss, hwm   int64 // bytes, /proc/PID/status VmRSS and VmHWM
	goroutines int64
	// heap and stacks in use, and heap the runtime holds unused and has
	// not returned to the OS (bytes, from rotor's go_memstats_* metrics)
	heapInuse, stackInuse, heapHeld int64
}

// holdTimeout bounds how long n stalled streams may take to open.
const holdTimeout = 2 * time.Minute

// holdStreams opens n chat streams on stallModel through the bridge, each
// read up to its first bytes (the provider then stalls it), reads the
// bridge's memory while all n are open, and closes them.
func holdStreams(ctx context.Context, r *rig, n int) (*heldStreams, error) {
	t := newStreamTarget(modeRotor, r.bridge.url, r.token, "api/"+stallModel, n)
	defer t.close()
	ctx, cancel := context.WithTimeout(ctx, holdTimeout)
	defer cancel()
	var wg sync.WaitGroup
	opened := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _, err := t.send(ctx)
			if err != nil {
				opened <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				opened <- fmt.Errorf("status %d", resp.StatusCode)
				return
			}
			buf := make([]byte, 512)
			if _, err := resp.Body.Read(buf); err != nil {
				opened <- fmt.Errorf("first bytes: %w", err)
				return
			}
			opened <- nil
			<-ctx.Done()
		}()
	}
	var errs []error
	for range n {
		if err := <-opened; err != nil {
			errs = append(errs, err)
		}
	}
	var h *heldStreams
	if len(errs) == 0 {
		h = &heldStreams{n: n}
		var err error
		if h.rss, h.hwm, err = readRSS(r.bridge.pid()); err != nil {
			errs = append(errs, err)
		}
		mc := &http.Client{Timeout: 5 * time.Second}
		if m, err := scrapeMetrics(ctx, mc, r.bridge.url, r.token); err == nil {
			h.goroutines = int64(m["go_goroutines"])
			h.heapInuse = int64(m["go_memstats_heap_inuse_bytes"])
			h.stackInuse = int64(m["go_memstats_stack_inuse_bytes"])
			h.heapHeld = int64(m["go_memstats_heap_idle_bytes"] - m["go_memstats_heap_released_bytes"])
		}
	}
	cancel()
	wg.Wait()
	if len(errs) > 0 {
		return nil, fmt.Errorf("%d of %d failed, first: %w", len(errs), n, errs[0])
	}
	return h, nil
}
