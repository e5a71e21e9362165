// Package config is rotor's typed configuration: defaults, the strict YAML
// file loader, overrides of single keys (from ROTOR_* variables and flags,
// which cmd/rotor reads through viper), the settings the spec names, and
// validation that names the offending key.
//
// It must not import any other rotor package except internal/dur, and it
// never reads environment variables itself: callers pass a lookup function.
package config
