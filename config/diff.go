package config

import (
	"reflect"
	"strings"
)

// Changed lists the top-level keys (as rotor.yaml names them: "log.level",
// "pools") whose values differ between a and b, in the table's order. Spec
// settings compare their resolved values. A reload uses it to refuse keys
// that need a restart and to say what changed.
func Changed(a, b *Config) []string {
	var out []string
	for _, f := range settings {
		if f.ptr == nil {
			continue
		}
		if !reflect.DeepEqual(reflect.ValueOf(f.ptr(a)).Elem().Interface(), reflect.ValueOf(f.ptr(b)).Elem().Interface()) {
			out = append(out, f.key)
		}
	}
	return out
}

// restartOnly are the keys a running server cannot take on a reload: what
// it bound, opened or built once at start.
var restartOnly = map[string]bool{
	"runtime.listen": true, "bridge.listen": true, "bridge.runtime_url": true,
	"runtime.token_file": true, "runtime.allowed_origins": true, "bridge.allowed_origins": true,
	"runtime.read_header_timeout": true, "runtime.read_timeout": true,
	"log.format":             true,
	"model_cooldown.enabled": true, "learned_cooldown.storage": true,
}

// RestartOnly reports whether key needs a restart to change: listen
// addresses, the runtime URL and token, allowed origins, the server's own
// read timeouts (net/http reads them per connection, unsynchronised: a
// new value needs a new server), the log format, every ledger.* key,
// model_cooldown.enabled and learned_cooldown.storage (shared/DESIGN.md,
// "Reload").
func RestartOnly(key string) bool {
	return restartOnly[key] || strings.HasPrefix(key, "ledger.")
}
