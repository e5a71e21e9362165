// Package httpx is the HTTP plumbing shared by the runtime and the bridge:
// the one JSON error shape and its table of codes, the guard, the outer
// layers every server shares (AccessLog: panic recovery, request ids, the
// access log), the caller's identity in the request context (WithCaller),
// and the parsing of Retry-After advice.
//
// It imports no top-level rotor package.
package httpx
