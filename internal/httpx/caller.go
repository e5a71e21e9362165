package httpx

import "context"

// Caller is who a request comes from, as the front door authenticated it.
// It travels in the request's context from the guard to the route; only a
// bridge forwarding to a standalone runtime puts it on the wire (the
// runtime's ClientHeader).
type Caller struct {
	// Label is the client token's label, recorded on usage rows.
	Label string
	// TokenHash is the SHA-256 of the client token. With CheckToken set,
	// admission re-checks in the ledger transaction that the token is
	// still stored: the bridge's front door may have answered from a
	// cached token list.
	TokenHash  [32]byte
	CheckToken bool
}

type callerKey struct{}

// WithCaller returns ctx carrying c, and notes c's label in the request's
// access record (AccessInfo) for the access log.
func WithCaller(ctx context.Context, c Caller) context.Context {
	if info, ok := ctx.Value(accessKey{}).(*AccessInfo); ok {
		info.Client = c.Label
	}
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller in ctx; the zero Caller when there is none.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// ClientHeader carries the caller's label from a bridge to a standalone
// runtime: the one hop where the caller travels on the wire. The runtime
// trusts it only from holders of the runtime token; the bridge drops any
// copy its own callers send.
const ClientHeader = "X-Rotor-Client"
