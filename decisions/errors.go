package decisions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
)

// Errors of the route. The adapter (ErrorResponse) maps each to one status
// and code.
var (
	// ErrModelNotAvailable: no credential in the pool and region is
	// eligible for the model.
	ErrModelNotAvailable = errors.New("no eligible credential for the model")
	// ErrPoolUnavailable: every credential was rejected with 401 or 403
	// (or a mix with permanent quota).
	ErrPoolUnavailable = errors.New("every credential in the pool was rejected")
	// ErrInsufficientQuota: every credential was rejected for permanent
	// quota.
	ErrInsufficientQuota = errors.New("every credential has exhausted its quota")
	// ErrResponseTooLarge: the answer was over 64 MiB.
	ErrResponseTooLarge = errors.New("provider answer larger than 64 MiB")
	// ErrUpstream: the provider call failed after the request may have
	// been sent; it is not replayed.
	ErrUpstream = errors.New("provider call failed")
	// ErrDeadline: the request deadline passed.
	ErrDeadline = errors.New("request deadline passed")
	// ErrOverloaded: too many bytes are buffered across requests.
	ErrOverloaded = errors.New("too many bytes buffered")
	// ErrClientGone: the caller cancelled.
	ErrClientGone = errors.New("client closed the request")
	// ErrShutdown: the server cut the request after its shutdown grace.
	ErrShutdown = errors.New("server shutting down")
)

// ProviderError is a provider rejection passed through to the caller: its
// status and safe code, type and param are kept; its message is not.
type ProviderError struct {
	Status            int
	Code, Type, Param string
	// Structured: the answer held an OpenAI-style error object.
	Structured bool
	// RetryAfter is the provider's wait advice on a 429 passed through
	// (an unclassified one), 0 for none; the caller gets it as rotor's.
	RetryAfter time.Duration
}

// Refused reports a 4xx with a structured error: the provider refused the
// request and does not bill it.
func (e *ProviderError) Refused() bool {
	return e.Structured && e.Status >= 400 && e.Status < 500
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("provider answered %d %s", e.Status, e.Code)
}

// safeField accepts the identifier-like values providers use for code, type
// and param; anything else (free text that may reflect private input) is
// dropped.
var safeField = regexp.MustCompile(`^[A-Za-z0-9_.\-\[\]]{1,64}$`)

func sanitize(s, key string) string {
	if !safeField.MatchString(s) || (key != "" && strings.Contains(s, key)) {
		return ""
	}
	return s
}

// providerError is the structured error of a provider answer.
type providerError struct {
	Message, Type, Code, Param string
	structured                 bool
}

func parseProviderError(body []byte) providerError {
	var e struct {
		Error *struct {
			Message any `json:"message"`
			Type    any `json:"type"`
			Code    any `json:"code"`
			Param   any `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil {
		return providerError{}
	}
	str := func(v any) string {
		switch x := v.(type) {
		case string:
			return x
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		return ""
	}
	return providerError{Message: str(e.Error.Message), Type: str(e.Error.Type), Code: str(e.Error.Code), Param: str(e.Error.Param), structured: true}
}

func newProviderError(status int, pe providerError, key string) *ProviderError {
	return &ProviderError{Status: status, Code: sanitize(pe.Code, key), Type: sanitize(pe.Type, key), Param: sanitize(pe.Param, key), Structured: pe.structured}
}

// ErrorResponse is the route's one table from errors to answers.
func ErrorResponse(err error) *httpx.Error {
	var he *httpx.Error
	var pe *ProviderError
	var be *budgets.ExceededError
	var pbe *budgets.PolicyBlockedError
	if e, ok := cooldownErrorResponse(err); ok {
		return e
	}
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &pbe):
		return httpx.NewError(httpx.CodePolicyBlocked).WithMessage("%s", pbe.Error())
	case errors.As(err, &be):
		return httpx.NewError(httpx.CodeBudgetExceeded).WithMessage("%s", be.Error()).WithRetryAfter(be.RetryAfter)
	case errors.As(err, &pe):
		t := pe.Type
		if t == "" {
			t = httpx.TypeAPI
			if pe.Status >= 400 && pe.Status < 500 {
				t = httpx.TypeInvalidRequest
			}
		}
		e := &httpx.Error{Status: pe.Status, Code: pe.Code, Type: t, Param: pe.Param,
			Message: fmt.Sprintf("the provider rejected the request with status %d; its message is withheld because it may reflect private input", pe.Status)}
		if pe.RetryAfter > 0 {
			e = e.WithRetryAfter(boundRetryAfter(pe.RetryAfter))
		}
		return e
	case errors.Is(err, ErrModelNotAvailable):
		return httpx.NewError(httpx.CodeModelNotAvailable)
	case errors.Is(err, ErrPoolUnavailable):
		return httpx.NewError(httpx.CodePoolUnavailable)
	case errors.Is(err, ErrInsufficientQuota):
		return httpx.NewError(httpx.CodeInsufficientQuota)
	case errors.Is(err, ErrResponseTooLarge):
		return httpx.NewError(httpx.CodeResponseTooLarge)
	case errors.Is(err, ErrOverloaded):
		return httpx.NewError(httpx.CodeOverloaded).WithRetryAfter(time.Second)
	case errors.Is(err, pool.ErrNoCredentials):
		e := httpx.NewError(httpx.CodeNoCredentials)
		var nce *pool.NoCredentialsError
		if errors.As(err, &nce) {
			e = e.WithMessage("%v", nce)
		}
		return e
	case errors.Is(err, ledger.ErrTokenRevoked):
		return httpx.NewError(httpx.CodeInvalidToken)
	case errors.Is(err, ledger.ErrUnavailable), errors.Is(err, ledger.ErrReadOnly), errors.Is(err, ledger.ErrClosed):
		return httpx.NewError(httpx.CodeLedgerUnavailable).WithRetryAfter(time.Second)
	case errors.Is(err, ErrDeadline), errors.Is(err, context.DeadlineExceeded):
		return httpx.NewError(httpx.CodeDeadlineExceeded)
	case errors.Is(err, ErrShutdown):
		return httpx.NewError(httpx.CodeServerShutdown)
	case errors.Is(err, ErrClientGone), errors.Is(err, context.Canceled):
		return httpx.NewError(httpx.CodeClientClosedRequest)
	case errors.Is(err, ErrUpstream):
		return httpx.NewError(httpx.CodeUpstreamError)
	}
	return httpx.NewError(httpx.CodeInternal)
}

// maxRetryAfter bounds the cooldown advice rotor sends.
const maxRetryAfter = pool.LargestMaxSeconds * time.Second

// cooldownErrorResponse is the spec's cooldown_error_response adapter: it
// turns a *pool.CooldownExhaustedError or *pool.CapacityError anywhere in
// err's chain into rotor's JSON error, with Retry-After advice that
// httpx.WriteError renders as an integer of at least 1 (ceil of the exact
// wait):
//   - scoped all-cooling: 429 model_cooldown;
//   - legacy all-cooling: 429 rate_limit_exceeded;
//   - capacity: 503 model_cooldown_capacity.
//
// It returns false for any other error, pool.ErrNoCredentials included.
func cooldownErrorResponse(err error) (*httpx.Error, bool) {
	if ce, ok := errors.AsType[*pool.CooldownExhaustedError](err); ok {
		code := httpx.CodeRateLimitExceeded
		if ce.Scoped {
			code = httpx.CodeModelCooldown
		}
		return httpx.NewError(code).WithRetryAfter(boundRetryAfter(ce.RetryAfter)), true
	}
	if ce, ok := errors.AsType[*pool.CapacityError](err); ok {
		return httpx.NewError(httpx.CodeModelCooldownCapacity).WithRetryAfter(boundRetryAfter(ce.RetryAfter)), true
	}
	return nil, false
}

// boundRetryAfter keeps advice positive (httpx omits Retry-After for zero)
// and within the largest configurable maximum.
func boundRetryAfter(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Second
	}
	return min(d, maxRetryAfter)
}
