// Package config is rotor's typed configuration: defaults, the strict YAML
// file loader, overrides of single keys (from ROTOR_* variables and flags,
// which cmd/rotor reads through viper), the settings the spec names, and
// validation that names the offending key.
//
// keys.go holds one table row per key (where it lives, its default, its
// doc); the file walker, Set, Keys, Default and the starter file all read
// those rows, so a new key is a struct field and a row.
//
// It must not import any other rotor package except internal/dur, and it
// never reads environment variables itself: callers pass a lookup function.
package config
