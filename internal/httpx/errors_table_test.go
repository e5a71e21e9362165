package httpx

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every code answers with the status the README's error table gives it: a
// client (and its retry logic) keys on the status, so a code answered
// with another one breaks it silently. The README test in cmd/rotor checks
// only that each code is listed.
func TestCodesAnswerTheREADMEStatus(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| (\\d{3}) \\| `([a-z_]+)`")
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		info, ok := Codes[m[2]]
		if !ok {
			continue // a provider's code passed through, not rotor's own
		}
		seen[m[2]] = true
		if want, _ := strconv.Atoi(m[1]); info.Status != want {
			t.Errorf("%s answers %d, the README table says %d", m[2], info.Status, want)
		}
	}
	for code := range Codes {
		if !seen[code] {
			t.Errorf("%s has no row in the README error table", code)
		}
	}
}

// x-should-retry: false goes out on exactly the codes the README names as
// futile to retry (a retry would find the same refusal or re-run a paid
// call); budget_exceeded gets it only with a long wait (TestShouldRetryFalse).
func TestNeverRetryCodesAreTheREADMEs(t *testing.T) {
	never := map[string]bool{
		CodeResponseTooLarge: true, CodeRouteResponseTooLarge: true,
		CodePoolUnavailable: true, CodeRoutePoolUnavailable: true, CodeNoCredentials: true,
		CodePolicyBlocked: true, CodeInsufficientQuota: true,
	}
	for code := range Codes {
		rec := httptest.NewRecorder()
		WriteError(rec, NewError(code))
		if got, want := rec.Header().Get("x-should-retry") == "false", never[code]; got != want {
			t.Errorf("%s: x-should-retry: false is %v, want %v", code, got, want)
		}
	}
}

// An error without a code or a param says so with JSON null, as the
// OpenAI error shape does (SDKs type them as optional strings): never an
// empty string a client would take for a code.
func TestErrorBodyNullsAnAbsentCodeAndParam(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Message: "bad"})
	var body struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %s: %v", rec.Body, err)
	}
	for _, k := range []string{"code", "param"} {
		if v, ok := body.Error[k]; !ok || string(v) != "null" {
			t.Errorf("error.%s = %s (present %v), want null", k, v, ok)
		}
	}
}
