// Package defaults is the one home of the default settings that both the
// configuration (config.Default) and the constructors' zero-value
// fallbacks use, so the two cannot drift apart.
//
// It imports nothing from rotor.
package defaults

import "time"

const (
	// Deadline bounds a request: discovery, admission, body reads,
	// waits and retries.
	Deadline = 60 * time.Second
	// GenerationDeadline bounds a whole request on the OpenAI routes.
	GenerationDeadline = 10 * time.Minute
	// StreamIdleTimeout cuts a stream whose upstream is silent this long.
	StreamIdleTimeout = 120 * time.Second
	// ShutdownGrace is how long shutdown waits for requests and streams
	// in flight before it cuts them.
	ShutdownGrace = 30 * time.Second
	// ErrorBodyIdle ends a provider error body read after this long
	// without data.
	ErrorBodyIdle = 5 * time.Second
	// MaxBufferedMB bounds bytes buffered across requests, in MiB.
	MaxBufferedMB = 1024
	// CatalogTTL is how long a credential's model catalog stays fresh.
	CatalogTTL = 10 * time.Minute
	// CatalogTimeout bounds one catalog fetch.
	CatalogTimeout = 10 * time.Second
	// MaxCooldownSeconds is MODEL_COOLDOWN_MAX_SECONDS when unset.
	MaxCooldownSeconds = 3600
	// AuthRest is the rest after a genuine auth rejection without valid
	// advice (the spec's Codex Everywhere 300 s).
	AuthRest = 300 * time.Second
)
