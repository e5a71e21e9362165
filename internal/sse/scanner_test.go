package sse

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// got is one Event copied out of the scanner.
type got struct {
	kind Kind
	raw  string
	data *string
	name string
}

func (g got) String() string {
	d := "<nil>"
	if g.data != nil {
		d = *g.data
	}
	return "{" + [...]string{"event", "comment"}[g.kind] + " raw=" + strings.ReplaceAll(strings.ReplaceAll(g.raw, "\r", `\r`), "\n", `\n`) + " data=" + d + " name=" + g.name + "}"
}

func copyEvent(ev Event) got {
	g := got{kind: ev.Kind, raw: string(ev.Raw), name: ev.Name}
	if ev.Data != nil {
		d := string(ev.Data)
		g.data = &d
	}
	return g
}

// scanAll reads r to its end and returns the events and the final error.
func scanAll(r io.Reader) ([]got, error) { return scanWith(NewScanner(r)) }

func scanWith(s *Scanner) ([]got, error) {
	var out []got
	for {
		ev, err := s.Next()
		if err != nil {
			if ev.Raw != nil {
				out = append(out, copyEvent(ev))
			}
			return out, err
		}
		out = append(out, copyEvent(ev))
	}
}

func str(s string) *string { return &s }

func TestScannerEvents(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []got
		wantErr error
	}{
		{"empty", "", nil, io.EOF},
		{"one data line", "data: {\"a\":1}\n\n", []got{{KindEvent, "data: {\"a\":1}\n\n", str(`{"a":1}`), ""}}, io.EOF},
		{"no space after colon", "data:x\n\n", []got{{KindEvent, "data:x\n\n", str("x"), ""}}, io.EOF},
		{"only the first space is dropped", "data:  x\n\n", []got{{KindEvent, "data:  x\n\n", str(" x"), ""}}, io.EOF},
		{"data lines joined", "data: a\ndata: b\ndata:\n\n", []got{{KindEvent, "data: a\ndata: b\ndata:\n\n", str("a\nb\n"), ""}}, io.EOF},
		{"bare data field", "data\n\n", []got{{KindEvent, "data\n\n", str(""), ""}}, io.EOF},
		{"event name", "event: response.created\ndata: {}\n\n", []got{{KindEvent, "event: response.created\ndata: {}\n\n", str("{}"), "response.created"}}, io.EOF},
		{"event without data", "event: ping\n\n", []got{{KindEvent, "event: ping\n\n", nil, "ping"}}, io.EOF},
		{"id and retry kept raw", "id: 7\nretry: 10\ndata: x\n\n", []got{{KindEvent, "id: 7\nretry: 10\ndata: x\n\n", str("x"), ""}}, io.EOF},
		{"keep-alive comment", ": keep-alive\n\ndata: x\n\n", []got{
			{KindComment, ": keep-alive\n", nil, ""},
			{KindComment, "\n", nil, ""},
			{KindEvent, "data: x\n\n", str("x"), ""},
		}, io.EOF},
		{"comment inside a block", "data: a\n: note\ndata: b\n\n", []got{{KindEvent, "data: a\n: note\ndata: b\n\n", str("a\nb"), ""}}, io.EOF},
		{"crlf", "data: a\r\ndata: b\r\n\r\n", []got{{KindEvent, "data: a\r\ndata: b\r\n\r\n", str("a\nb"), ""}}, io.EOF},
		{"cr", "data: a\rdata: b\r\rdata: c\r\r", []got{
			{KindEvent, "data: a\rdata: b\r\r", str("a\nb"), ""},
			{KindEvent, "data: c\r\r", str("c"), ""},
		}, io.EOF},
		{"mixed endings", "event: e\r\ndata: a\rdata: b\n\r\n", []got{{KindEvent, "event: e\r\ndata: a\rdata: b\n\r\n", str("a\nb"), "e"}}, io.EOF},
		{"leading BOM", "\xef\xbb\xbfdata: x\n\n", []got{{KindEvent, "\xef\xbb\xbfdata: x\n\n", str("x"), ""}}, io.EOF},
		{"cut inside a block", "data: a\n\ndata: b\n", []got{
			{KindEvent, "data: a\n\n", str("a"), ""},
			{KindEvent, "data: b\n", nil, ""},
		}, io.ErrUnexpectedEOF},
		{"cut inside a line", "data: a\n\nda", []got{
			{KindEvent, "data: a\n\n", str("a"), ""},
			{KindEvent, "da", nil, ""},
		}, io.ErrUnexpectedEOF},
		{"done", "data: [DONE]\n\n", []got{{KindEvent, "data: [DONE]\n\n", str("[DONE]"), ""}}, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := scanAll(strings.NewReader(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if len(evs) != len(tt.want) {
				t.Fatalf("events = %v, want %v", evs, tt.want)
			}
			for i := range evs {
				if evs[i].String() != tt.want[i].String() {
					t.Errorf("event %d = %v, want %v", i, evs[i], tt.want[i])
				}
			}
		})
	}
}

// TestScannerCRLFSplitAcrossReads: an event ending in "\r" is returned at
// once, without waiting for a "\n" that has not arrived; the "\n" then
// opens the next event's Raw, so that the stream stays exact.
func TestScannerCRLFSplitAcrossReads(t *testing.T) {
	pr, pw := io.Pipe()
	s := NewScanner(pr)
	go func() { _, _ = io.WriteString(pw, "data: a\r\n\r") }()
	ev, err := s.Next() // must not block on the "\n"
	if err != nil || string(ev.Raw) != "data: a\r\n\r" || string(ev.Data) != "a" {
		t.Fatalf("Next = %q %q, %v; want the event at once", ev.Raw, ev.Data, err)
	}
	go func() {
		_, _ = io.WriteString(pw, "\ndata: b\r\n\r\n")
		_ = pw.Close()
	}()
	ev, err = s.Next()
	if err != nil || string(ev.Raw) != "\ndata: b\r\n\r\n" || string(ev.Data) != "b" {
		t.Fatalf("Next = %q %q, %v; want the split \\n first, then event b", ev.Raw, ev.Data, err)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Fatalf("Next at end = %v, want io.EOF", err)
	}
}

// TestScannerCommentArrivesAlone: a comment is returned as soon as its line
// is complete, so that a proxy passes it on and an idle timer resets while
// the provider stays silent otherwise.
func TestScannerCommentArrivesAlone(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	s := NewScanner(pr)
	go func() { _, _ = io.WriteString(pw, ": keep-alive\n") }()
	ev, err := s.Next()
	if err != nil || ev.Kind != KindComment || string(ev.Raw) != ": keep-alive\n" {
		t.Fatalf("Next = %v, %v; want the comment alone", copyEvent(ev), err)
	}
}

func TestScannerEventTooLarge(t *testing.T) {
	big := "data: " + strings.Repeat("x", MaxEventSize) + "\n\n"
	s := NewScanner(strings.NewReader("data: small\n\n" + big + "data: after\n\n"))
	if ev, err := s.Next(); err != nil || string(ev.Data) != "small" {
		t.Fatalf("first Next = %q, %v", ev.Data, err)
	}
	if _, err := s.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("Next on a %d-byte event = %v, want ErrEventTooLarge", len(big), err)
	}
	if _, err := s.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("Next after ErrEventTooLarge = %v, want it again", err)
	}
	// Exactly MaxEventSize bytes is allowed, over several lines too.
	line := "data: " + strings.Repeat("y", 1<<20-7) + "\n" // 1 MiB per line
	exact := strings.Repeat(line, 15) + "data: " + strings.Repeat("z", 1<<20-8) + "\n\n"
	if len(exact) != MaxEventSize {
		t.Fatalf("test setup: len = %d", len(exact))
	}
	s = NewScanner(strings.NewReader(exact))
	if ev, err := s.Next(); err != nil || len(ev.Raw) != MaxEventSize {
		t.Fatalf("Next on a %d-byte event = %d bytes, %v; want it whole", len(exact), len(ev.Raw), err)
	}
}

// The 16 MiB limit is exact, and holds as the bytes arrive: an event of
// MaxEventSize+1 bytes is refused even when only its final blank line
// pushes it over, and a line that has grown one byte past the limit is
// refused at once, without waiting for the rest of the line (here a read
// error stands for a provider that never sends it), so that an oversized
// event is reported as too large and never held in memory beyond the
// limit.
func TestScannerEventTooLargeByOneByte(t *testing.T) {
	line := "data: " + strings.Repeat("y", 1<<20-7) + "\n" // 1 MiB per line
	over := strings.Repeat(line, 15) + "data: " + strings.Repeat("z", 1<<20-7) + "\n\n"
	if len(over) != MaxEventSize+1 {
		t.Fatalf("test setup: len = %d", len(over))
	}
	s := NewScanner(strings.NewReader(over))
	if ev, err := s.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("Next on a %d-byte event = %d bytes, %v; want ErrEventTooLarge", len(over), len(ev.Raw), err)
	}
	boom := errors.New("provider stalled")
	long := "data: " + strings.Repeat("x", MaxEventSize-5) // no line end yet
	s = NewScanner(io.MultiReader(strings.NewReader(long), iotest.ErrReader(boom)))
	if ev, err := s.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("Next on an unfinished %d-byte line = %d bytes, %v; want ErrEventTooLarge before the next read", len(long), len(ev.Raw), err)
	}
}

// TestScannerMemoryBoundedByOneEvent: a long stream of small events keeps
// the scanner's buffers at the size of one event.
func TestScannerMemoryBoundedByOneEvent(t *testing.T) {
	ev := "data: " + strings.Repeat("a", 100) + "\n\n"
	s := NewScanner(io.LimitReader(repeat(ev), int64(len(ev))*100000))
	n := 0
	for {
		_, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 100000 {
		t.Fatalf("events = %d, want 100000", n)
	}
	if cap(s.raw) > 4*len(ev) || cap(s.data) > 4*len(ev) {
		t.Fatalf("buffers grew to raw %d, data %d bytes for %d-byte events", cap(s.raw), cap(s.data), len(ev))
	}
}

// repeatReader repeats s forever.
type repeatReader struct {
	s   string
	off int
}

func repeat(s string) *repeatReader { return &repeatReader{s: s} }

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.s[r.off:])
		n += c
		r.off = (r.off + c) % len(r.s)
	}
	return n, nil
}

func TestScannerReadError(t *testing.T) {
	boom := errors.New("boom")
	s := NewScanner(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)))
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	ev, err := s.Next()
	if !errors.Is(err, boom) || string(ev.Raw) != "data: b\n" {
		t.Fatalf("Next = %q, %v; want the unfinished bytes and the read error", ev.Raw, err)
	}
}

// TestScannerRawIsTheStream: whatever the reads' sizes, the events' Raw
// concatenated is the stream, and the data seen is the same.
func TestScannerRawIsTheStream(t *testing.T) {
	in := ": hi\r\n\r\nevent: a\r\ndata: 1\r\ndata: 2\r\n\r\ndata: 3\r\rdata: 4\n\n\n\ndata: [DONE]\r\n\r\n"
	whole, err := scanAll(strings.NewReader(in))
	if err != io.EOF {
		t.Fatal(err)
	}
	bytewise, err := scanAll(iotest.OneByteReader(strings.NewReader(in)))
	if err != io.EOF {
		t.Fatal(err)
	}
	for _, evs := range [][]got{whole, bytewise} {
		var b strings.Builder
		for _, e := range evs {
			b.WriteString(e.raw)
		}
		if b.String() != in {
			t.Errorf("raw concatenated = %q, want %q", b.String(), in)
		}
	}
	if d1, d2 := dataOf(whole), dataOf(bytewise); d1 != d2 {
		t.Errorf("data whole = %q, byte by byte = %q", d1, d2)
	}
}

func dataOf(evs []got) string {
	var b strings.Builder
	for _, e := range evs {
		if e.kind == KindEvent && e.data != nil {
			b.WriteString(e.name + "|" + *e.data + ";")
		}
	}
	return b.String()
}

// FuzzScanner checks on any input that the scanner never panics, that Raw
// concatenated is the input whatever the read sizes, that events and data
// do not depend on read sizes, and that Data and Name match a plain
// line-by-line reading of each event's Raw.
func FuzzScanner(f *testing.F) {
	for _, seed := range []string{
		"data: {\"a\":1}\n\n",
		": keep-alive\n\ndata: x\n\n",
		"event: response.completed\r\ndata: {}\r\n\r\n",
		"data: a\rdata: b\r\r",
		"data: a\n: c\ndata: b\n\ndata: [DONE]\n\n",
		"\xef\xbb\xbfdata: x\n\nda",
		"id: 1\nretry: 5\nfoo\ndata\n\n\n\r\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, err1 := scanAll(bytes.NewReader(in))
		bytewise, err2 := scanAll(iotest.OneByteReader(bytes.NewReader(in)))
		if err1 != err2 {
			t.Fatalf("errors differ: %v, byte by byte %v", err1, err2)
		}
		for _, evs := range [][]got{whole, bytewise} {
			var b bytes.Buffer
			for _, e := range evs {
				b.WriteString(e.raw)
			}
			if !bytes.Equal(b.Bytes(), in) {
				t.Fatalf("raw concatenated = %q, want %q", b.Bytes(), in)
			}
		}
		// A scanner reset after another stream (one that ends inside a
		// "\r\n" and a block) reads the input as a new one does.
		used := NewScanner(strings.NewReader("\xef\xbb\xbfdata: a\r"))
		_, _ = scanWith(used)
		used.Reset(bytes.NewReader(in))
		reused, err3 := scanWith(used)
		if err3 != err1 || !reflect.DeepEqual(reused, whole) {
			t.Fatalf("after Reset = %v, %v; want %v, %v", reused, err3, whole, err1)
		}
		if d1, d2 := dataOf(whole), dataOf(bytewise); d1 != d2 {
			t.Fatalf("data whole = %q, byte by byte = %q", d1, d2)
		}
		for i, e := range whole {
			if e.kind != KindEvent || (i == len(whole)-1 && err1 != io.EOF) {
				continue
			}
			data, name := reference(e.raw, i == 0)
			if (data == nil) != (e.data == nil) || (data != nil && *data != *e.data) || name != e.name {
				t.Fatalf("event %v: reference data %v name %q", e, data, name)
			}
		}
	})
}

// reference parses one event's raw bytes the slow, obvious way.
func reference(raw string, first bool) (data *string, name string) {
	if first {
		raw = strings.TrimPrefix(raw, "\xef\xbb\xbf")
	}
	raw = strings.ReplaceAll(raw, "\r\n", "\n")
	raw = strings.ReplaceAll(raw, "\r", "\n")
	var lines []string
	for _, l := range strings.Split(raw, "\n") {
		if l == "" || l[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(l, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "data":
			lines = append(lines, value)
		case "event":
			name = value
		}
	}
	if lines != nil {
		d := strings.Join(lines, "\n")
		data = &d
	}
	return data, name
}

func BenchmarkScanner(b *testing.B) {
	chunk := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}],"usage":null}` + "\n\n"
	b.Run("chat", func(b *testing.B) { benchScan(b, chunk) })
	named := "event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"word "}` + "\n\n"
	b.Run("responses", func(b *testing.B) { benchScan(b, named) })
}

func benchScan(b *testing.B, ev string) {
	s := NewScanner(repeat(ev))
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

func TestEventReady(t *testing.T) {
	tests := []struct {
		name, stream string
		want         []bool // EventReady after each Next
	}{
		{"two events in one read", "data: a\n\ndata: b\n\n", []bool{true, false}},
		{"second event unfinished", "data: a\n\ndata: b\n", []bool{false}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []bool{true, false}},
		{"cr", "data: a\r\rdata: b\r\r", []bool{true, false}},
		{"comment stands alone", "data: a\n\n: keep-alive\n", []bool{true, false}},
		{"multi-line event", "data: a\n\ndata: b\ndata: c\n\n", []bool{true, false}},
		// A comment line after a field line belongs to that block: it is
		// no event of its own while the block is unfinished.
		{"comment inside an unfinished block", "data: a\n\ndata: b\n: note\n", []bool{false}},
		{"comment inside an unfinished block, crlf", "data: a\r\n\r\nevent: x\r\n: note\r\n", []bool{false}},
		{"comment inside a finished block", "data: a\n\ndata: b\n: note\n\n", []bool{true, false}},
		{"comment before fields stands alone", "data: a\n\n: note\ndata: b\n", []bool{true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := NewScanner(strings.NewReader(tt.stream))
			for i, want := range tt.want {
				if _, err := sc.Next(); err != nil {
					t.Fatalf("Next %d: %v", i, err)
				}
				if got := sc.EventReady(); got != want {
					t.Errorf("EventReady after event %d = %v, want %v", i, got, want)
				}
			}
		})
	}
}

func TestScannerReset(t *testing.T) {
	tests := []struct {
		name, before string
	}{
		{"after a clean end", "data: a\n\n"},
		{"after an error", "data: a"},
		{"after a split crlf", "data: a\r"},
		{"after a large event", "data: " + strings.Repeat("x", 2*keepRaw) + "\n\n"},
	}
	const stream = "\xef\xbb\xbfdata: b\ndata: c\n\nevent: e\ndata: d\n\n"
	want, wantErr := scanAll(strings.NewReader(stream))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScanner(strings.NewReader(tt.before))
			_, _ = scanWith(s)
			s.Reset(strings.NewReader(stream))
			got, err := scanWith(s)
			if err != wantErr || !reflect.DeepEqual(got, want) {
				t.Errorf("after Reset: %v, %v; want %v, %v", got, err, want, wantErr)
			}
			if cap(s.raw) > keepRaw {
				t.Errorf("Reset kept a %d-byte event buffer, want at most %d", cap(s.raw), keepRaw)
			}
		})
	}
}

func TestLineEnd(t *testing.T) {
	for _, tt := range []struct {
		b    string
		want int
	}{{"", -1}, {"abc", -1}, {"a\nb", 1}, {"a\rb", 1}, {"ab\r\n", 2}, {"a\nb\r", 1}, {"\r", 0}} {
		if got := lineEnd([]byte(tt.b)); got != tt.want {
			t.Errorf("lineEnd(%q) = %d, want %d", tt.b, got, tt.want)
		}
	}
}

// Carry marks the "\n" of a "\r\n" split across reads that opens an
// event's Raw but ends the event before; it is 0 otherwise.
func TestCarryMarksASplitCRLF(t *testing.T) {
	r, w := io.Pipe()
	go func() {
		for _, part := range []string{"data: a\r\n\r", "\ndata: b\r\n\r\n", "data: c\n\n"} {
			w.Write([]byte(part))
		}
		w.Close()
	}()
	sc := NewScanner(r)
	var carries []int
	for {
		ev, err := sc.Next()
		if err != nil {
			break
		}
		carries = append(carries, ev.Carry)
	}
	if !slices.Equal(carries, []int{0, 1, 0}) {
		t.Errorf("carries %v, want [0 1 0]", carries)
	}
}
