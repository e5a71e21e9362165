package bridge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// A body of exactly 64 MiB is within the cap ("over 64 MiB" is refused):
// it reaches the runtime whole, with a Content-Length or chunked, whichever
// runtime is behind the bridge.
func TestBodyOfExactlyTheCapIsForwarded(t *testing.T) {
	var read atomic.Int64
	runtime := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		read.Store(n)
		if err != nil {
			read.Store(-1)
		}
	})
	eachRuntimeServing(t, runtime, func(t *testing.T, srv *httptest.Server) {
		for _, cl := range []int64{MaxBody, -1} {
			read.Store(0)
			resp, body := callWithToken(t, "POST", srv.URL+"/v1/chat/completions", io.LimitReader(aFiller{}, MaxBody), cl)
			if resp.StatusCode != 200 || read.Load() != MaxBody {
				t.Errorf("Content-Length %d: %d %s, runtime read %d bytes; want 200 and the whole body", cl, resp.StatusCode, body, read.Load())
			}
		}
	})
}
