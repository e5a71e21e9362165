package httpx

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rotorhq/rotor/internal/clock"
)

// A handler panic is answered 500 internal_error, "details are in the log
// under the request id" (README, error table): the one line logged for it
// (a panic writes no access line) names the id the answer carried in
// X-Request-ID, so that the caller's id finds it. (With Recover outside
// RequestIDs the line said request_id="": it read the request before the
// id was set.)
func TestPanicLoggedUnderTheAnswersRequestID(t *testing.T) {
	logs := &bytes.Buffer{}
	al := AccessLog{Server: "test", Logger: slog.New(slog.NewJSONHandler(logs, nil)), Clock: clock.Real()}
	h := al.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/decisions", nil))
	var line struct {
		Msg       string `json:"msg"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log %s: %v", logs, err)
	}
	id := rec.Header().Get("X-Request-ID")
	if rec.Code != http.StatusInternalServerError || id == "" || line.RequestID != id {
		t.Errorf("answer %d with X-Request-ID %q; log line %q has request_id %q, want the answer's id", rec.Code, id, line.Msg, line.RequestID)
	}
}
