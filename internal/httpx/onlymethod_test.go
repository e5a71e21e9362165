package httpx

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// A GET route answers HEAD too (a probe that sends HEAD /healthz gets
// 200, as net/http's GET patterns give it), and any other method 405 with
// Allow; GET /healthz answers {"status":"ok"} as JSON (README).
func TestOnlyMethodGETAdmitsHEAD(t *testing.T) {
	h := OnlyMethod(http.MethodGet, http.HandlerFunc(Healthz))
	for _, tt := range []struct {
		method string
		status int
	}{{"GET", 200}, {"HEAD", 200}, {"POST", 405}, {"DELETE", 405}} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, "/healthz", nil))
		if rec.Code != tt.status || (tt.status == 405) != (rec.Header().Get("Allow") == "GET") {
			t.Errorf("%s /healthz = %d, Allow %q; want %d", tt.method, rec.Code, rec.Header().Get("Allow"), tt.status)
		}
		if tt.method == "GET" && (rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != `{"status":"ok"}`+"\n") {
			t.Errorf("GET /healthz = %q %q, want application/json {\"status\":\"ok\"}", rec.Header().Get("Content-Type"), rec.Body)
		}
	}
}
