// Package e2e holds rotor's end-to-end and adversarial tests: each builds
// the real binary (github.com/rotorhq/rotor/cmd/rotor) once per test
// process and drives it as a user, a script, an attacker, a broken
// provider or a crash would, against the fake provider in
// internal/fakeprovider, then checks what the provider received and what
// the ledger holds.
//
// The package has no code outside its tests; `go test ./...` runs it with
// the rest, `go test ./e2e` alone, and scripts/adversarial.sh runs its
// TestAdversarial* cases. Unit tests of the CLI's own functions stay in
// cmd/rotor.
package e2e
