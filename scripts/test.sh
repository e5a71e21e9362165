#!/usr/bin/env bash
# Run rotor's whole test suite with the race detector, as CI does: every
# package's unit tests and e2e/, the end-to-end tests on the built binary.
# Extra arguments go to go test (for example -run TestScripts -v).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -race "$@" ./...
