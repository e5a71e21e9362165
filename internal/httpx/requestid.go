package httpx

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
)

type requestIDKey struct{}

// NewRequestID returns a random 128-bit request id in hex. Ids need to be
// unique, not secret: math/rand/v2's generator (ChaCha8, seeded by the
// runtime) gives that without a system call per request.
func NewRequestID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// SafeID reports whether s is 1-64 letters, digits, '-', '_' or '.': what
// rotor accepts from a trusted hop as a request id, so that it cannot
// inject into logs or headers.
func SafeID(s string) bool { return safe(s, false) }

// SafeLabel is SafeID for a client label from a trusted hop, which may
// also hold '@': a home's default token on a shared ledger is labelled
// default@<hostname>.
func SafeLabel(s string) bool { return safe(s, true) }

func safe(s string, at bool) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || at && c == '@') {
			return false
		}
	}
	return true
}

// WithRequestID returns ctx carrying id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// RequestIDs is middleware that gives every request an id, puts it in the
// context and in the X-Request-ID answer header. An incoming X-Request-ID
// is kept only when trust is set and says yes for the request (the runtime
// trusts a bridge that sent the runtime token) and the id is well formed.
func RequestIDs(next http.Handler, trust func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := ""
		if trust != nil && trust(r) {
			if in := r.Header.Get("X-Request-ID"); SafeID(in) {
				id = in
			}
		}
		if id == "" {
			id = NewRequestID()
		}
		w.Header().Set("X-Request-ID", id)
		next.ServeHTTP(w, r.WithContext(WithRequestID(r.Context(), id)))
	})
}
