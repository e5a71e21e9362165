package bridge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
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
	standalone := httptest.NewServer(runtime)
	t.Cleanup(standalone.Close)
	u, _ := url.Parse(standalone.URL)
	for _, rt := range []struct {
		name string
		h    http.Handler
		u    *url.URL
	}{{"in-process", runtime, nil}, {"standalone", nil, u}} {
		_, srv, _ := setup(t, rt.h, rt.u)
		for _, cl := range []int64{MaxBody, -1} {
			read.Store(0)
			resp, body := callWithToken(t, "POST", srv.URL+"/v1/chat/completions", io.LimitReader(aFiller{}, MaxBody), cl)
			if resp.StatusCode != 200 || read.Load() != MaxBody {
				t.Errorf("%s, Content-Length %d: %d %s, runtime read %d bytes; want 200 and the whole body", rt.name, cl, resp.StatusCode, body, read.Load())
			}
		}
	}
}
