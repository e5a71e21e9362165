#!/usr/bin/env bash
# Run rotor's whole test suite with the race detector, as CI does: every
# package's unit tests and e2e/, the end-to-end tests on the built binary.
# Extra arguments go to go test (for example -run TestScripts -v).
#
# The PostgreSQL tests use ROTOR_TEST_POSTGRES (each test in a schema of its
# own); it defaults to this machine's server,
# postgres://postgres@127.0.0.1:5432/test. Set it to an empty string to skip
# them. Outside CI (CI=true, set by .ci/run) an unreachable server is only
# reported here: the tests that need it then say so.
set -euo pipefail
cd "$(dirname "$0")/.."
export ROTOR_TEST_POSTGRES="${ROTOR_TEST_POSTGRES-postgres://postgres@127.0.0.1:5432/test}"
if [ -n "$ROTOR_TEST_POSTGRES" ] && command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -d "$ROTOR_TEST_POSTGRES"; then
  if [ "${CI:-}" = true ]; then
    echo "test.sh: cannot reach the test PostgreSQL (ROTOR_TEST_POSTGRES); CI must run its tests" >&2
    exit 1
  fi
  echo "test.sh: the test PostgreSQL is not reachable; its tests will fail (set ROTOR_TEST_POSTGRES= to skip them)" >&2
fi
exec go test -race "$@" ./...
