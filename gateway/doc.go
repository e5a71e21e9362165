// Package gateway is rotor's runtime HTTP server (the spec's "Flask
// application"): the Decisions route behind the guard (Host check, browser
// origins, bearer token), health, Prometheus metrics, status, and the
// access log.
//
// It takes the route as an http.Handler and the status document as a
// function, so it imports no route package (decisions, pool, budgets):
// only internal/ helpers. It knows the bridge only as a caller.
package gateway
