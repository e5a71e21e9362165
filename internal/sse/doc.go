// Package sse reads server-sent event streams (the WHATWG "text/event-stream"
// format) the way a proxy needs them: event by event, with memory bounded by
// one event (at most MaxEventSize bytes), each event's bytes kept exactly as
// they arrived so that they can be written through unchanged, and its data
// payload and event name exposed for inspection.
//
// On top of the scanner, ChatRewriter follows a chat completion stream
// (shared/DESIGN.md, "OpenAI-compatible routes"): it extracts the usage and
// drops the usage-only final chunk when rotor asked for it on the caller's
// behalf; ResponsesUsage reads the usage of a Responses stream's terminal
// event.
//
// The package is plumbing: it imports only the standard library and nothing
// of rotor.
package sse
