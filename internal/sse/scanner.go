package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// MaxEventSize is the largest event Scanner accepts, in raw bytes (line
// endings and comments included).
const MaxEventSize = 16 << 20

// ErrEventTooLarge is returned by Scanner.Next when an event grows past
// MaxEventSize. The scanner stops there: every later call returns it too.
var ErrEventTooLarge = errors.New("sse: event larger than 16 MiB")

// Kind says what an Event holds.
type Kind uint8

const (
	// KindEvent is a field block: one or more field lines (data, event, id,
	// retry or unknown fields, comments between them included) and the
	// blank line that dispatches it.
	KindEvent Kind = iota
	// KindComment is bytes a client ignores: one comment line (":" first)
	// that starts no field block, or a blank line that ends none, with its
	// line ending. Keep-alives (": keep-alive\n\n") arrive as two of them,
	// each as soon as it is complete.
	KindComment
)

// Event is one unit of a stream. Its slices belong to the Scanner and are
// valid until the next call to Next.
type Event struct {
	Kind Kind
	// Raw is the bytes exactly as read, line endings included. The Raw of
	// all events in order is the stream itself (see Scanner.Next for the
	// one case where a lone "\n" ending a "\r\n" split across reads opens
	// the next event instead of closing its own).
	Raw []byte
	// Data is the event's data lines joined by "\n" (the spec's data
	// buffer without its final newline); nil when the event has no data
	// field, empty (not nil) for a bare "data:".
	Data []byte
	// Name is the value of the last event field; "" when there is none.
	Name string
	// Carry is how many bytes at the start of Raw end the event before
	// (0, or 1: the "\n" of a "\r\n" split across reads). A reader that
	// drops this event still passes Raw[:Carry] on, or the event before
	// would end in a lone "\r" that line-splitting readers miss.
	Carry int
}

// Scanner reads an SSE stream event by event.
type Scanner struct {
	br     *bufio.Reader
	raw    []byte
	data   []byte
	name   string
	err    error
	skipLF bool // the last line ended with "\r": a "\n" next belongs to it
	carry  int  // Event.Carry of the event being read
	first  bool // no byte read yet: a leading BOM is not part of a field name
}

// NewScanner returns a Scanner reading from r.
func NewScanner(r io.Reader) *Scanner {
	return &Scanner{br: bufio.NewReaderSize(r, 32<<10), first: true}
}

// keepRaw is the largest event buffer Reset keeps: one large event must
// not pin its memory in a pool of idle scanners.
const keepRaw = 64 << 10

// Reset makes s read a new stream from r, as NewScanner(r) would, keeping
// its buffers (so that a proxy can pool scanners: a stream then costs no
// 32 KiB read buffer). Events returned before are no longer valid.
func (s *Scanner) Reset(r io.Reader) {
	s.br.Reset(r)
	raw, data := s.raw[:0], s.data[:0]
	if cap(raw) > keepRaw {
		raw = nil
	}
	if cap(data) > keepRaw {
		data = nil
	}
	*s = Scanner{br: s.br, raw: raw, data: data, first: true}
}

// Next returns the next event. At a clean end of the stream (after a
// complete event) it returns io.EOF. When the stream ends inside a block or
// a line, it returns the unfinished bytes as Raw (Kind KindEvent, Data and
// Name unset: a client would discard them) with io.ErrUnexpectedEOF. A read
// error is returned as it is, with the bytes of the unfinished block. An
// event larger than MaxEventSize is ErrEventTooLarge. After any error the
// scanner is spent.
//
// Lines end with "\n", "\r\n" or "\r". An event ending in "\r" is returned
// at once; when its "\n" had not arrived yet, that "\n" is the first byte of
// the next event's Raw, so that the concatenation stays exact.
func (s *Scanner) Next() (Event, error) {
	if s.err != nil {
		return Event{}, s.err
	}
	s.raw = s.raw[:0]
	s.data = s.data[:0]
	s.carry = 0
	ev, err := s.next()
	ev.Carry = min(s.carry, len(ev.Raw))
	return ev, err
}

// next reads the event Next returns.
func (s *Scanner) next() (Event, error) {
	var (
		fields    bool   // a field line was read: this is a field block
		dataLines int    // data lines so far
		dataStart int    // with one data line: its value in raw
		dataEnd   int    //
		name      []byte // value of the last event field, in raw
		hasName   bool
	)
	for {
		start, end, err := s.line()
		if err != nil {
			s.err = err
			switch {
			case err == ErrEventTooLarge:
				return Event{}, err
			case err == io.EOF && len(s.raw) == 0:
				return Event{}, io.EOF
			case err == io.EOF && start == len(s.raw) && !fields:
				// Only the "\n" of a "\r\n" split across reads: pass it on.
				return Event{Kind: KindComment, Raw: s.raw}, nil
			case err == io.EOF:
				s.err = io.ErrUnexpectedEOF
			}
			return Event{Kind: KindEvent, Raw: s.raw}, s.err
		}
		line := s.raw[start:end]
		if s.first {
			s.first = false
			line = bytes.TrimPrefix(line, bom)
		}
		if len(line) == 0 { // blank line
			if !fields {
				return Event{Kind: KindComment, Raw: s.raw}, nil
			}
			ev := Event{Kind: KindEvent, Raw: s.raw}
			switch {
			case dataLines == 1:
				ev.Data = s.raw[dataStart:dataEnd]
			case dataLines > 1:
				ev.Data = s.data[:len(s.data)-1]
			}
			if hasName {
				if string(name) != s.name { // no allocation when the name repeats
					s.name = string(name)
				}
				ev.Name = s.name
			}
			return ev, nil
		}
		if line[0] == ':' {
			if !fields {
				return Event{Kind: KindComment, Raw: s.raw}, nil
			}
			continue
		}
		fields = true
		field, value := line, line[len(line):]
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			dataLines++
			vs := end - len(value)
			switch dataLines {
			case 1:
				dataStart, dataEnd = vs, end
			case 2:
				s.data = append(s.data, s.raw[dataStart:dataEnd]...)
				s.data = append(s.data, '\n')
				fallthrough
			default:
				s.data = append(s.data, value...)
				s.data = append(s.data, '\n')
			}
		case "event":
			name, hasName = value, true
		}
	}
}

var bom = []byte("\xef\xbb\xbf")

// line appends the next line, terminator included, to s.raw and returns
// where its content starts and ends in s.raw. When the stream ends before a
// line ending it returns the read error (io.EOF at the end) and where the
// unfinished line starts; the bytes read stay in s.raw.
func (s *Scanner) line() (start, end int, err error) {
	if s.skipLF {
		b, err := s.br.Peek(1)
		if err != nil {
			return len(s.raw), 0, err
		}
		s.skipLF = false
		if b[0] == '\n' {
			if len(s.raw) == 0 {
				s.carry = 1 // it ends the event before
			}
			s.raw = append(s.raw, '\n')
			_, _ = s.br.Discard(1)
		}
	}
	start = len(s.raw)
	for {
		if _, err := s.br.Peek(1); err != nil {
			return start, 0, err
		}
		buf, _ := s.br.Peek(s.br.Buffered())
		i := lineEnd(buf)
		if i < 0 {
			if len(s.raw)+len(buf) > MaxEventSize {
				return 0, 0, ErrEventTooLarge
			}
			s.raw = append(s.raw, buf...)
			_, _ = s.br.Discard(len(buf))
			continue
		}
		n := i + 1
		if buf[i] == '\r' {
			if n < len(buf) {
				if buf[n] == '\n' {
					n++
				}
			} else {
				s.skipLF = true // the "\n", if any, has not arrived yet
			}
		}
		if len(s.raw)+n > MaxEventSize {
			return 0, 0, ErrEventTooLarge
		}
		end = len(s.raw) + i
		s.raw = append(s.raw, buf[:n]...)
		_, _ = s.br.Discard(n)
		return start, end, nil
	}
}

// EndLF finishes the event Next returned last when it ended in a "\r"
// whose next byte had not arrived: it waits for that byte and, when it is
// the "\n" of a "\r\n", takes it and reports true. A proxy that stops
// after a stream's terminal event passes that "\n" on, so that the stream
// it forwarded ends as the provider's did. Otherwise it reads nothing and
// reports false.
func (s *Scanner) EndLF() bool {
	if s.err != nil || !s.skipLF {
		return false
	}
	b, err := s.br.Peek(1)
	if err != nil || b[0] != '\n' {
		return false
	}
	s.skipLF = false
	_, _ = s.br.Discard(1)
	return true
}

// EventReady reports whether the bytes already read from the stream hold a
// complete next event (a comment line before any field line, or a block
// ended by a blank line), so that Next returns it without waiting on the
// stream. A proxy flushes
// only when it is false: events that arrived together go out in one write,
// and an event never waits in a buffer for one that has not arrived.
func (s *Scanner) EventReady() bool {
	if s.err != nil {
		return false
	}
	buf, _ := s.br.Peek(s.br.Buffered())
	lineStart := 0
	if s.skipLF && len(buf) > 0 && buf[0] == '\n' {
		lineStart = 1
	}
	fields := false // a field line came first: a comment is part of its block
	for i := lineStart; i < len(buf); i++ {
		if n := lineEnd(buf[i:]); n < 0 {
			return false
		} else {
			i += n
		}
		c := buf[i]
		if i == lineStart {
			return true // a blank line ends a block (or is one, alone)
		}
		if buf[lineStart] != ':' {
			fields = true
		} else if !fields {
			return true // a comment line before any field stands alone
		}
		if c == '\r' && i+1 < len(buf) && buf[i+1] == '\n' {
			i++
		}
		lineStart = i + 1
	}
	return false
}

// lineEnd is the index of the first "\r" or "\n" in b, or -1: two
// IndexByte scans, the second only up to the first's hit (bytes.IndexAny
// builds a set on every call).
func lineEnd(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	head := b
	if n >= 0 {
		head = b[:n]
	}
	if r := bytes.IndexByte(head, '\r'); r >= 0 {
		return r
	}
	return n
}
