#!/usr/bin/env bash
# Run rotor's whole test suite with the race detector, as CI does.
# Extra arguments go to go test (for example -run TestScripts -v).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -race "$@" ./...
