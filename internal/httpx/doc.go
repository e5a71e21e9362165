// Package httpx is the HTTP plumbing shared by the runtime and the bridge:
// the one JSON error shape and its table of codes, request ids, and the
// parsing of Retry-After advice.
//
// It imports no top-level rotor package.
package httpx
