package bridge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/internal/httpx"
)

// A standalone runtime ends a broken stream cleanly to the bridge, its
// trailer marked Aborted: the bridge breaks off its own answer, so that
// the caller's SDK reports an error rather than a clean end. A stream that
// ended well ends cleanly.
func TestAbortedRecordBreaksOffTheCallersStream(t *testing.T) {
	for _, aborted := range []bool{true, false} {
		rt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 1\n\n")
			http.NewResponseController(w).Flush()
			// As the runtime sends it (gateway.Server.Handler): unannounced.
			w.Header().Set(http.TrailerPrefix+httpx.AccessHeader, (&httpx.AccessInfo{Code: "upstream_stream_cut", Aborted: aborted}).Encode())
		}))
		u, _ := url.Parse(rt.URL)
		_, srv, _ := setup(t, nil, u)
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		rt.Close()
		if string(b) != "data: 1\n\n" || (err != nil) != aborted {
			t.Errorf("aborted %v: caller read %q, err %v; want the event, then an error only when aborted", aborted, b, err)
		}
		if v := resp.Trailer.Get(httpx.AccessHeader); v != "" {
			t.Errorf("aborted %v: the runtime's record reached the caller: %q", aborted, v)
		}
	}
}
