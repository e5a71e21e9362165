// Package names is the one home of the names rotor's packages share: the
// pool names a model prefix selects, and the rule for the names operators
// give credentials, budgets and client tokens.
//
// It imports nothing from rotor.
package names

import "regexp"

// Pool names: each serves the model prefix of the same name.
const (
	PoolAPI = "api"
	PoolZDR = "zdr"
)

// Pools are the pool names, in status order.
var Pools = []string{PoolAPI, PoolZDR}

// Rule says, for error messages, what Valid accepts.
const Rule = "1-64 letters, digits, '.', '_' or '-'"

var valid = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Valid reports whether s is a valid credential, budget or client token
// name: a label, never a secret, safe in logs, headers and file names.
func Valid(s string) bool { return valid.MatchString(s) }

// OpenAIRoutes are the OpenAI-compatible paths the runtime and the bridge
// serve, each with the methods it takes (an Allow value). The one ending
// in "/" is a subtree: the stored responses, which rotor does not serve.
var OpenAIRoutes = map[string]string{
	"/v1/responses":        "POST",
	"/v1/chat/completions": "POST",
	"/v1/embeddings":       "POST",
	"/v1/models":           "GET",
	"/v1/responses/":       "GET, DELETE",
}

// OpenAIMethods is the Allow value of an OpenAI path ("" when path is
// none).
func OpenAIMethods(path string) string {
	if m, ok := OpenAIRoutes[path]; ok {
		return m
	}
	if len(path) > len("/v1/responses/") && path[:len("/v1/responses/")] == "/v1/responses/" {
		return OpenAIRoutes["/v1/responses/"]
	}
	return ""
}
