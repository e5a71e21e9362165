package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/internal/httpx"
)

// The runtime gives a bridge (a caller naming a client) its access record
// as a header when the answer starts and a trailer when it ends; a direct
// caller gets neither.
func TestRuntimeSendsItsAccessRecordToABridgeOnly(t *testing.T) {
	r := newRig(t)
	for _, tc := range []struct {
		name   string
		hdr    []string
		record bool
	}{
		{"bridge", []string{httpx.ClientHeader, "ci"}, true},
		{"direct", nil, false},
	} {
		req, _ := http.NewRequest("POST", r.srv.URL+"/v1/decisions", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+runtimeToken)
		for i := 0; i+1 < len(tc.hdr); i += 2 {
			req.Header.Set(tc.hdr[i], tc.hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		var got httpx.AccessInfo
		got.Merge(resp.Header.Get(httpx.AccessHeader))
		if ok := got.Pool == "api" && got.Model == "decide-mini" && got.Credential == "a" && got.Attempts == 1; ok != tc.record {
			t.Errorf("%s: record %+v from header %q, want one: %v", tc.name, got, resp.Header.Get(httpx.AccessHeader), tc.record)
		}
		if tc.record {
			continue
		}
		if v := resp.Trailer.Get(httpx.AccessHeader); v != "" {
			t.Errorf("%s: trailer %q", tc.name, v)
		}
	}
}
