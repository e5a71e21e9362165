package fakeprovider

import (
	"context"
	"net/http"
	"time"
)

// Received is one request as the fake saw it. Body and Header are shared
// with the fake's own record: treat them as read-only.
type Received struct {
	Method string
	Path   string
	// Key is the raw API key from Authorization: Bearer ("" when missing),
	// so tests can tell which credential rotor used. The fake never logs it.
	Key string
	// Model is the model field of a POST route's body ("" for other
	// requests or when the body is not valid JSON).
	Model string
	// Body is the request body when it is at most MaxRecordedBody bytes
	// (empty, not nil, for an empty body); nil for larger bodies, which are
	// known by BodyLen and BodySHA256 only.
	Body []byte
	// BodyLen is the body length in bytes. For a body over the size limit
	// it is the limit plus one (the fake stops reading there and answers
	// 413).
	BodyLen int64
	// BodySHA256 is the SHA-256 of the body (of what was read, see
	// BodyLen).
	BodySHA256 [32]byte
	// Header is a copy of the request headers, Authorization included.
	Header http.Header
	// At is the arrival time, from Options.Now.
	At time.Time
	// Status is the status the fake answered with; 0 when it sent none (a
	// reset, a stall, a client that went away first).
	Status int
	// Step names the behaviour that answered, e.g. "RateLimited(30)"; "" for
	// answers the fake gives before any script (401 unknown key, 404 unknown
	// path, 405, 413).
	Step string
	// Canceled reports that the client went away before the fake finished
	// its answer (a cancelled stall or delay, a client that stopped reading
	// a long body).
	Canceled bool
}

// Requests returns every recorded request, in arrival order. Requests
// still in flight appear with Status 0; their record is completed when they
// end. Recording can be turned off (SetRecording).
func (s *Server) Requests() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Received, len(s.received))
	for i, r := range s.received {
		out[i] = *r
	}
	return out
}

// RequestsFor returns the recorded requests with key and path, in order.
func (s *Server) RequestsFor(key, path string) []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Received
	for _, r := range s.received {
		if r.Key == key && r.Path == path {
			out = append(out, *r)
		}
	}
	return out
}

// SetRecording turns request recording on or off. Off, Requests stays as
// it is and the fake keeps no per-request memory; hit counters,
// cancellations and the OnRequest hook keep working.
func (s *Server) SetRecording(on bool) { s.recording.Store(on) }

// Hits returns how many requests arrived for path (PathDecisions,
// PathModels, or any other path), whatever their key or outcome.
func (s *Server) Hits(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// HitsFor returns how many requests with key arrived for path.
func (s *Server) HitsFor(key, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keyHits[hitKey{key, path}]
}

// OnRequest sets a hook called with each request as it arrives, after its
// body was read and before it is answered (Status 0), on the request's own
// goroutine: a slow hook delays the answer. Tests use it to learn that the
// provider has a request, e.g. to cancel the client at that moment. nil
// removes the hook.
func (s *Server) OnRequest(f func(Received)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRequest = f
}

// WaitHits waits until at least n requests have arrived for path, or ctx
// ends.
func (s *Server) WaitHits(ctx context.Context, path string, n int) error {
	for {
		s.mu.Lock()
		if s.hits[path] >= n {
			s.mu.Unlock()
			return nil
		}
		ch := s.waitChanLocked()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitCanceled waits for a request whose client went away before the fake
// finished answering, and returns it. Each cancellation is returned once,
// in the order they happened; one that happened before the call is
// returned at once. It returns ctx's error if ctx ends first.
func (s *Server) WaitCanceled(ctx context.Context) (Received, error) {
	for {
		s.mu.Lock()
		if s.cancelNext < len(s.cancels) {
			r := s.cancels[s.cancelNext]
			s.cancelNext++
			s.mu.Unlock()
			return r, nil
		}
		ch := s.waitChanLocked()
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Received{}, ctx.Err()
		}
	}
}

// Canceled returns how many requests were cancelled by their client so far.
func (s *Server) Canceled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cancels)
}

// waitChanLocked returns the channel closed at the next hit or
// cancellation; mu must be held.
func (s *Server) waitChanLocked() chan struct{} {
	if s.notify == nil {
		s.notify = make(chan struct{})
	}
	return s.notify
}

// wakeLocked wakes the waiters; mu must be held.
func (s *Server) wakeLocked() {
	if s.notify != nil {
		close(s.notify)
		s.notify = nil
	}
}
