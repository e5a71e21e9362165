package decisions

import (
	"errors"
	"io"
	"sync/atomic"
)

// MaxBody is the largest request body and the largest answer rotor
// buffers: 64 MiB.
const MaxBody = 64 << 20

// limiter bounds the bytes buffered across every request in flight. It
// never blocks: a read that would pass the bound fails, and the route
// answers 503 server_overloaded.
type limiter struct {
	max  atomic.Int64
	used atomic.Int64
}

func newLimiter(max int64) *limiter {
	l := &limiter{}
	l.max.Store(max)
	return l
}

func (l *limiter) tryAcquire(n int64) bool {
	if l == nil {
		return true
	}
	if l.used.Add(n) > l.max.Load() {
		l.used.Add(-n)
		return false
	}
	return true
}

func (l *limiter) release(n int64) {
	if l != nil && n > 0 {
		l.used.Add(-n)
	}
}

// errTooLarge is a body over the cap.
var errTooLarge = errors.New("body too large")

// buffer is bytes read under the limiter; Release gives them back.
type buffer struct {
	b    []byte
	held int64
	l    *limiter
}

func (b *buffer) Release() {
	b.l.release(b.held)
	b.held = 0
	b.b = nil
}

// readAll reads r into memory, at most limit bytes, acquiring from l before
// each chunk. It returns errTooLarge past limit and ErrOverloaded when the
// limiter refuses. sizeHint (a Content-Length, or -1) sizes the first
// allocation.
func readAll(r io.Reader, limit int64, l *limiter, sizeHint int64) (*buffer, error) {
	buf := &buffer{l: l}
	initial := int64(512)
	if sizeHint > 0 {
		initial = min(sizeHint+1, limit+1)
	}
	if !l.tryAcquire(initial) {
		return nil, ErrOverloaded
	}
	buf.held = initial
	b := make([]byte, 0, initial)
	for {
		if int64(len(b)) == int64(cap(b)) {
			grow := max(int64(cap(b)), 32<<10)
			if int64(cap(b))+grow > limit+1 {
				grow = limit + 1 - int64(cap(b))
			}
			if grow <= 0 {
				buf.b = b
				buf.Release()
				return nil, errTooLarge
			}
			if !l.tryAcquire(grow) {
				buf.b = b
				buf.Release()
				return nil, ErrOverloaded
			}
			buf.held += grow
			nb := make([]byte, len(b), int64(cap(b))+grow)
			copy(nb, b)
			b = nb
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			buf.b = b
			buf.Release()
			return nil, errTooLarge
		}
		if err == io.EOF {
			buf.b = b
			return buf, nil
		}
		if err != nil {
			buf.b = b
			buf.Release()
			return nil, err
		}
	}
}
