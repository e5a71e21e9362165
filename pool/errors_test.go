package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/httpx"
)

func TestAdapterCodes(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"scoped", &CooldownExhaustedError{Scoped: true, RetryAfter: 5 * time.Second}, 429, "model_cooldown"},
		{"legacy", &CooldownExhaustedError{RetryAfter: 5 * time.Second}, 429, "rate_limit_exceeded"},
		{"capacity", &CapacityError{RetryAfter: 5 * time.Second}, 503, "model_cooldown_capacity"},
		{"wrapped", fmt.Errorf("decisions: select: %w", &CooldownExhaustedError{Scoped: true, RetryAfter: 5 * time.Second}), 429, "model_cooldown"},
		{"joined", errors.Join(errors.New("candidate b: 500"), &CapacityError{RetryAfter: 5 * time.Second}), 503, "model_cooldown_capacity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := CooldownErrorResponse(tc.err)
			if !ok {
				t.Fatalf("CooldownErrorResponse(%v) = false", tc.err)
			}
			w := httptest.NewRecorder()
			httpx.WriteError(w, e)
			if w.Code != tc.status {
				t.Errorf("status = %d, want %d", w.Code, tc.status)
			}
			var body struct {
				Error struct {
					Code         string `json:"code"`
					RetryAfterMS int64  `json:"retry_after_ms"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body.Error.Code != tc.code || body.Error.RetryAfterMS != 5000 || w.Header().Get("Retry-After") != "5" {
				t.Errorf("answer = %s %v, want code %s with Retry-After 5", w.Body, w.Header(), tc.code)
			}
		})
	}
	for _, err := range []error{nil, ErrNoCredentials, errors.New("boom"), fmt.Errorf("x: %w", ErrNoCredentials)} {
		if e, ok := CooldownErrorResponse(err); ok || e != nil {
			t.Errorf("CooldownErrorResponse(%v) = %v, true; want false", err, e)
		}
	}
}

func TestAdapterRetryAfterIsIntegerNeverZero(t *testing.T) {
	cases := []struct {
		wait time.Duration
		want int64
	}{
		{-time.Second, 1},
		{0, 1},
		{time.Nanosecond, 1},
		{300 * time.Millisecond, 1},
		{time.Second, 1},
		{1500 * time.Millisecond, 2},
		{time.Hour, 3600},
		{time.Hour + time.Nanosecond, 3601},
		{math.MaxInt64, LargestMaxSeconds},
	}
	for _, tc := range cases {
		for _, err := range []error{
			&CooldownExhaustedError{Scoped: true, RetryAfter: tc.wait},
			&CooldownExhaustedError{RetryAfter: tc.wait},
			&CapacityError{RetryAfter: tc.wait},
		} {
			e, _ := CooldownErrorResponse(err)
			w := httptest.NewRecorder()
			httpx.WriteError(w, e)
			got, perr := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
			if perr != nil || got != tc.want {
				t.Errorf("%T wait %v: Retry-After = %q, want %d", err, tc.wait, w.Header().Get("Retry-After"), tc.want)
			}
		}
	}
}

func TestWrappersPreserveCooldownErrors(t *testing.T) {
	exhausted := &CooldownExhaustedError{Scoped: true, RetryAfter: 3 * time.Second}
	capacity := &CapacityError{RetryAfter: 7 * time.Second}

	t.Run("step", func(t *testing.T) {
		err := PreserveCooldownErrors(func() error {
			return fmt.Errorf("route: %w", errors.Join(errors.New("candidate b: 502"), exhausted))
		})
		if err != error(exhausted) {
			t.Errorf("PreserveCooldownErrors = %v, want the cooldown error itself", err)
		}
		if err := PreserveCooldownErrors(func() error { return fmt.Errorf("x: %w", capacity) }); err != error(capacity) {
			t.Errorf("PreserveCooldownErrors = %v, want the capacity error itself", err)
		}
		other := errors.New("upstream 502")
		if err := PreserveCooldownErrors(func() error { return other }); err != other {
			t.Errorf("PreserveCooldownErrors changed %v to %v", other, err)
		}
		if err := PreserveCooldownErrors(func() error { return nil }); err != nil {
			t.Errorf("PreserveCooldownErrors(nil) = %v", err)
		}
	})

	t.Run("failover loop", func(t *testing.T) {
		// A candidate loop stops at a cooldown error: no candidate fallback.
		tried := 0
		var last error
		for _, step := range []error{exhausted, errors.New("never reached")} {
			tried++
			if last = step; IsCooldownError(last) {
				break
			}
		}
		if tried != 1 || !IsCooldownError(fmt.Errorf("w: %w", last)) {
			t.Errorf("tried %d candidates, want 1", tried)
		}
		if IsCooldownError(ErrNoCredentials) || IsCooldownError(nil) {
			t.Error("IsCooldownError is true for a non-cooldown error")
		}
	})

	t.Run("handler", func(t *testing.T) {
		generic := func(w http.ResponseWriter, _ *http.Request, _ error) {
			httpx.WriteError(w, httpx.NewError(httpx.CodeInternal)) // what a generic wrapper does
		}
		cases := []struct {
			name   string
			err    error
			onErr  func(http.ResponseWriter, *http.Request, error)
			status int
			retry  string
		}{
			{"scoped", fmt.Errorf("decisions: %w", exhausted), generic, 429, "3"},
			{"capacity", fmt.Errorf("decisions: %w", capacity), generic, 503, "7"},
			{"legacy", &CooldownExhaustedError{RetryAfter: 2 * time.Second}, generic, 429, "2"},
			{"other error", errors.New("boom"), generic, 500, ""},
			{"other error, no writer", errors.New("boom"), nil, 500, ""},
			{"no error", nil, generic, 200, ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				h := PreserveCooldownErrorsHandler(func(w http.ResponseWriter, _ *http.Request) error {
					if tc.err == nil {
						w.WriteHeader(200)
					}
					return tc.err
				}, tc.onErr)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/decisions", nil))
				if w.Code != tc.status || w.Header().Get("Retry-After") != tc.retry {
					t.Errorf("answer = %d Retry-After %q, want %d %q", w.Code, w.Header().Get("Retry-After"), tc.status, tc.retry)
				}
			})
		}
	})
}
