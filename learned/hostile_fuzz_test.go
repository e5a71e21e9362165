package learned

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"
)

// FuzzHostileRecord: a shared ledger may hold any bytes under an
// identity, and a hostile or buggy writer computes the CRC. Whatever
// version-6 record decodes, the learner must not panic on it, must keep
// every wait within 1 s (at an episode's first throttle) .. the cap and
// above trusted advice, and must write back only states that stay valid.
func FuzzHostileRecord(f *testing.F) {
	good := writtenState()
	b := good.encode()
	f.Add(b[:len(b)-4], []byte{0, 30, 1, 60, 2, 10})
	f.Fuzz(func(t *testing.T, body []byte, ops []byte) {
		if len(body) != adaptSize-4 || len(ops) > 60 {
			return
		}
		body = append([]byte(nil), body...)
		body[0] = adaptVersion
		rec := binary.BigEndian.AppendUint32(body, crc32.ChecksumIEEE(body))
		st, err := decodeState(rec)
		if err != nil {
			return
		}
		const capSeconds = 1800
		h := newHarness(t, ModeApply, withAdapt(), withMaxSeconds(capSeconds))
		// Put the record at a time near the state's own times, as a
		// process sharing the ledger would have written it.
		now := time.Duration(0)
		if st.last > epoch.UnixMilli() && st.last < epoch.UnixMilli()+int64(30*24*time.Hour/time.Millisecond) {
			now = time.Duration(st.last-epoch.UnixMilli()) * time.Millisecond
		}
		h.at(now)
		if _, err := h.store.Put(context.Background(), Record{ID: h.ev.Identity, State: rec}, 0, h.clk.Now()); err != nil {
			t.Fatal(err)
		}
		at := now
		for i := 0; i+1 < len(ops); i += 2 {
			at += time.Duration(ops[i+1]) * time.Second
			switch ops[i] % 3 {
			case 0:
				before, _ := h.state()
				d, ok := h.throttle(at)
				if ok {
					after, _ := h.state()
					first := after.anchor == h.at(at).UnixMilli() && before.anchor != after.anchor
					if d > capSeconds*time.Second || d <= 0 || first && d < time.Second {
						t.Fatalf("op %d: wait %v (first throttle of an episode: %v)", i/2, d, first)
					}
				}
			case 1:
				h.success(at)
			case 2:
				d, ok := h.throttleHint(at, 90)
				if ok && d < 90*time.Second {
					t.Fatalf("op %d: wait %v below advice of 90 s", i/2, d)
				}
			}
			if s, ok := h.state(); ok && !s.valid() {
				t.Fatalf("op %d: invalid state written %+v", i/2, s)
			}
		}
	})
}
