package decisions

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
)

func TestAdapterCodes(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"scoped", &pool.CooldownExhaustedError{Scoped: true, RetryAfter: 5 * time.Second}, 429, "model_cooldown"},
		{"legacy", &pool.CooldownExhaustedError{RetryAfter: 5 * time.Second}, 429, "rate_limit_exceeded"},
		{"capacity", &pool.CapacityError{RetryAfter: 5 * time.Second}, 503, "model_cooldown_capacity"},
		{"wrapped", fmt.Errorf("decisions: select: %w", &pool.CooldownExhaustedError{Scoped: true, RetryAfter: 5 * time.Second}), 429, "model_cooldown"},
		{"joined", errors.Join(errors.New("candidate b: 500"), &pool.CapacityError{RetryAfter: 5 * time.Second}), 503, "model_cooldown_capacity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := cooldownErrorResponse(tc.err)
			if !ok {
				t.Fatalf("cooldownErrorResponse(%v) = false", tc.err)
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
	for _, err := range []error{nil, pool.ErrNoCredentials, errors.New("boom"), fmt.Errorf("x: %w", pool.ErrNoCredentials)} {
		if e, ok := cooldownErrorResponse(err); ok || e != nil {
			t.Errorf("cooldownErrorResponse(%v) = %v, true; want false", err, e)
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
		{math.MaxInt64, pool.LargestMaxSeconds},
	}
	for _, tc := range cases {
		for _, err := range []error{
			&pool.CooldownExhaustedError{Scoped: true, RetryAfter: tc.wait},
			&pool.CooldownExhaustedError{RetryAfter: tc.wait},
			&pool.CapacityError{RetryAfter: tc.wait},
		} {
			e, _ := cooldownErrorResponse(err)
			w := httptest.NewRecorder()
			httpx.WriteError(w, e)
			got, perr := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
			if perr != nil || got != tc.want {
				t.Errorf("%T wait %v: Retry-After = %q, want %d", err, tc.wait, w.Header().Get("Retry-After"), tc.want)
			}
		}
	}
}

// The pool stores a fractional delay exactly; only the answer rounds it up
// (pool's TestFractionalDelayRoundsUpOnlyInRetryAfter checks the stored
// side).
func TestFractionalCooldownRoundsUpOnlyInRetryAfter(t *testing.T) {
	e, _ := cooldownErrorResponse(&pool.CooldownExhaustedError{Scoped: true, RetryAfter: 1500 * time.Millisecond})
	w := httptest.NewRecorder()
	httpx.WriteError(w, e)
	if got := w.Header().Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q, want 2", got)
	}
	if got := w.Header().Get("retry-after-ms"); got != "1500" {
		t.Errorf("retry-after-ms = %q, want 1500", got)
	}
}

// A ledger that cannot record, is read-only or already closed (a request
// still in flight at shutdown) fails admission closed: 503
// ledger_unavailable with a second's Retry-After, never a 500.
func TestLedgerErrorsAre503LedgerUnavailable(t *testing.T) {
	for _, err := range []error{ledger.ErrUnavailable, ledger.ErrReadOnly, ledger.ErrClosed} {
		w := httptest.NewRecorder()
		httpx.WriteError(w, ErrorResponse(fmt.Errorf("reserve: %w", err)))
		if w.Code != 503 || !strings.Contains(w.Body.String(), `"ledger_unavailable"`) || w.Header().Get("Retry-After") != "1" {
			t.Errorf("%v: answer %d %s Retry-After %q, want 503 ledger_unavailable with Retry-After 1", err, w.Code, w.Body, w.Header().Get("Retry-After"))
		}
	}
}
