package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// GET /healthz needs no token on the runtime (the Host check still
// applies); another method, with the token, is 405 with Allow: GET.
func TestRuntimeHealthzIsOpenToGetOnly(t *testing.T) {
	r := newRig(t)
	for _, tt := range []struct {
		method string
		token  bool
		status int
		allow  string
		body   string
	}{
		{"GET", false, 200, "", `"ok"`},
		{"POST", true, 405, "GET", `"method_not_allowed"`},
	} {
		req, _ := http.NewRequest(tt.method, r.srv.URL+"/healthz", nil)
		if tt.token {
			req.Header.Set("Authorization", "Bearer "+runtimeToken)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || resp.Header.Get("Allow") != tt.allow || !strings.Contains(string(b), tt.body) {
			t.Errorf("%s /healthz (token %v) = %d Allow %q %s, want %d Allow %q %s", tt.method, tt.token, resp.StatusCode, resp.Header.Get("Allow"), b, tt.status, tt.allow, tt.body)
		}
	}
}
