package config

import _ "embed"

// Starter is the commented rotor.yaml that `rotor init` writes. It parses to
// the defaults.
//
//go:embed starter.yaml
var Starter []byte
