package pool

import (
	"context"
	"errors"
	"net/http"
)

// Outcome is the class of one upstream call's result: the spec's
// UpstreamOutcome evidence. Only Throttled and genuine credential-wide
// CredentialRejected outcomes create cooldowns; Success clears the scope it
// was observed in.
type Outcome int

const (
	// OutcomeUnknown is the zero value; Classify never returns it.
	OutcomeUnknown Outcome = iota
	// OutcomeSuccess is a 2xx: the credential served the call.
	OutcomeSuccess
	// OutcomeThrottled is a 429, or a classified quota-exhaustion.
	OutcomeThrottled
	// OutcomeCredentialRejected is an authentication or permission
	// rejection (401, 403). Whether it is credential-wide is decided
	// separately.
	OutcomeCredentialRejected
	// OutcomeCallerError is a 4xx caused by the request (a bare 402
	// included): it says nothing about the credential.
	OutcomeCallerError
	// OutcomeTransportFailure is a network error: no status was read.
	OutcomeTransportFailure
	// OutcomeCancelled is a call ended by the caller's cancellation or the
	// request deadline.
	OutcomeCancelled
	// OutcomeProviderFailure is a 5xx.
	OutcomeProviderFailure
)

var outcomeNames = [...]string{"unknown", "success", "throttled", "credential_rejected", "caller_error", "transport_failure", "cancelled", "provider_failure"}

// String returns the outcome's snake_case name, as learners and logs use
// it.
func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Classify maps a status code, or the error of a call that produced none,
// to an Outcome: 2xx success; 429 throttled; 401 and 403 credential
// rejected; other 4xx (a bare 402 included) caller error; 5xx provider
// failure; a cancelled or expired context cancelled; any other error a
// transport failure.
func Classify(status int, err error) Outcome {
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return OutcomeCancelled
		}
		return OutcomeTransportFailure
	}
	switch {
	case status >= 200 && status < 300:
		return OutcomeSuccess
	case status == http.StatusTooManyRequests:
		return OutcomeThrottled
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return OutcomeCredentialRejected
	case status >= 400 && status < 500:
		return OutcomeCallerError
	case status >= 500:
		return OutcomeProviderFailure
	}
	return OutcomeCallerError
}
