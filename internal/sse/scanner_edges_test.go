package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// chunkReader hands out its chunks one Read at a time (a chunk larger than
// the caller's buffer over several), so that a test fixes where the
// provider's writes were split; reads counts the Read calls.
type chunkReader struct {
	chunks []string
	reads  int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	r.reads++
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	if n == len(r.chunks[0]) {
		r.chunks = r.chunks[1:]
	} else {
		r.chunks[0] = r.chunks[0][n:]
	}
	return n, nil
}

// Carry is 1 only for the "\n" of a "\r\n" split across reads that ends
// the event before, and never more than Raw holds: a proxy passes
// Raw[:Carry] on for every event it holds back or drops (errors included),
// so a Carry inside an event would leak that event's first byte to the
// caller, and a Carry past Raw would panic the proxy.
func TestScannerCarryOnlyForTheEventBefore(t *testing.T) {
	type want struct {
		raw   string
		carry int
		err   error
	}
	tests := []struct {
		name   string
		chunks []string
		want   []want
	}{
		{"a split inside an event is no carry", []string{"data: a\r", "\ndata: b\r\n\r\n"},
			[]want{{"data: a\r\ndata: b\r\n\r\n", 0, nil}}},
		{"a split after an event is the next event's carry", []string{"data: a\r\n\r", "\ndata: b\r\n\r\n"},
			[]want{{"data: a\r\n\r", 0, nil}, {"\ndata: b\r\n\r\n", 1, nil}}},
		{"an event refused as too large after a split carries nothing", []string{"data: a\r\n\r", "\ndata: " + strings.Repeat("x", MaxEventSize)},
			[]want{{"data: a\r\n\r", 0, nil}, {"", 0, ErrEventTooLarge}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScanner(&chunkReader{chunks: tt.chunks})
			for i, w := range tt.want {
				ev, err := s.Next()
				if !errors.Is(err, w.err) || string(ev.Raw) != w.raw || ev.Carry != w.carry {
					t.Fatalf("event %d: Raw %.40q Carry %d, %v; want Raw %.40q Carry %d, %v", i, ev.Raw, ev.Carry, err, w.raw, w.carry, w.err)
				}
			}
		})
	}
}

// A BOM is skipped only as the stream's first bytes (WHATWG): anywhere
// else it is part of a field name, so "\ufeffdata: b" is an unknown field
// and carries no data. Read as data, it would be counted or dropped by the
// rewriter while the caller's client ignores it.
func TestScannerBOMOnlyAtTheStreamStart(t *testing.T) {
	tests := []struct {
		name, in string
		want     []got
	}{
		{"on a later event", "data: a\n\n\xef\xbb\xbfdata: b\n\n", []got{
			{KindEvent, "data: a\n\n", str("a"), ""},
			{KindEvent, "\xef\xbb\xbfdata: b\n\n", nil, ""},
		}},
		{"on the second line of the first event", "\xef\xbb\xbfdata: a\n\xef\xbb\xbfdata: b\n\n", []got{
			{KindEvent, "\xef\xbb\xbfdata: a\n\xef\xbb\xbfdata: b\n\n", str("a"), ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := scanAll(strings.NewReader(tt.in))
			if err != io.EOF || len(evs) != len(tt.want) {
				t.Fatalf("events %v, %v; want %v", evs, err, tt.want)
			}
			for i := range evs {
				if evs[i].String() != tt.want[i].String() {
					t.Errorf("event %d = %v, want %v", i, evs[i], tt.want[i])
				}
			}
		})
	}
}

// Only an empty line ends a block: a one-byte line inside it (a bare ":"
// comment, a one-letter unknown field) does not, or a chunk would reach
// the caller cut in two, its JSON broken.
func TestScannerOneByteLinesDoNotEndABlock(t *testing.T) {
	for _, in := range []string{
		"data: a\n:\ndata: b\n\n",
		"data: a\nx\ndata: b\n\n",
		"data: a\r:\rdata: b\r\r",
		"data: a\r\nx\r\ndata: b\r\n\r\n",
	} {
		evs, err := scanAll(strings.NewReader(in))
		want := got{KindEvent, in, str("a\nb"), ""}
		if err != io.EOF || len(evs) != 1 || evs[0].String() != want.String() {
			t.Errorf("%q: events %v, %v; want one event %v", in, evs, err, want)
		}
	}
}

// EndLF takes the "\n" of a "\r\n" split after the event Next returned,
// and nothing else: with no "\r" pending it reads nothing (a proxy calls
// it after the terminal event, and must not wait there on the provider),
// another byte stays for Next, and the "\n" it took is not taken again.
func TestEndLFTakesOnlyASplitCRLF(t *testing.T) {
	t.Run("no \\r pending: false, nothing read", func(t *testing.T) {
		r := &chunkReader{chunks: []string{"data: [DONE]\n\n", "\n"}}
		s := NewScanner(r)
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
		reads := r.reads
		if s.EndLF() || r.reads != reads {
			t.Errorf("EndLF with no \\r pending read %d more times; want false and no read", r.reads-reads)
		}
	})
	t.Run("the \\n of a split \\r\\n: true, taken once", func(t *testing.T) {
		s := NewScanner(&chunkReader{chunks: []string{"data: a\r\r", "\n\ndata: b\n\n"}})
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
		if !s.EndLF() {
			t.Fatal("EndLF = false, want the split \\n taken")
		}
		// The next "\n" is a blank line of its own, not a second half.
		evs, err := scanWith(s)
		want := []got{{KindComment, "\n", nil, ""}, {KindEvent, "data: b\n\n", str("b"), ""}}
		if err != io.EOF || len(evs) != 2 || evs[0].String() != want[0].String() || evs[1].String() != want[1].String() {
			t.Errorf("after EndLF: %v, %v; want %v", evs, err, want)
		}
	})
	t.Run("another byte after the \\r: false, the byte stays", func(t *testing.T) {
		s := NewScanner(&chunkReader{chunks: []string{"data: a\r\r", "x"}})
		if _, err := s.Next(); err != nil {
			t.Fatal(err)
		}
		if s.EndLF() {
			t.Error("EndLF = true on a byte other than \\n")
		}
		if ev, err := s.Next(); string(ev.Raw) != "x" || err != io.ErrUnexpectedEOF {
			t.Errorf("Next after EndLF = %q, %v; want the byte kept: \"x\", unexpected EOF", ev.Raw, err)
		}
	})
}

// Reset drops a large event's data buffer as it drops its raw one: many
// data lines build the joined data apart from Raw, and a pooled scanner
// must not pin it.
func TestScannerResetDropsALargeDataBuffer(t *testing.T) {
	ev := strings.Repeat("data: "+strings.Repeat("x", 1000)+"\n", 2*keepRaw/1000) + "\n"
	s := NewScanner(strings.NewReader(ev))
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	if cap(s.data) <= keepRaw {
		t.Fatalf("test setup: data buffer %d bytes, want over %d", cap(s.data), keepRaw)
	}
	s.Reset(strings.NewReader(""))
	if cap(s.data) > keepRaw {
		t.Errorf("Reset kept a %d-byte data buffer, want at most %d", cap(s.data), keepRaw)
	}
}
