// Package gateway is rotor's runtime HTTP server (the spec's "Flask
// application"): the Decisions routes behind the guard (Host check,
// browser origins, bearer token), health, Prometheus metrics, status, and
// the access log.
//
// It imports decisions, budgets, ledger, pool (for status) and internal/
// helpers; it knows the bridge only as a caller.
package gateway
