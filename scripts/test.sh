#!/usr/bin/env bash
# Run rotor's whole test suite with the race detector, as CI does: every
# package's unit tests and e2e/, the end-to-end tests on the built binary.
# Extra arguments go to go test (for example -run TestScripts -v).
#
# The PostgreSQL tests use ROTOR_TEST_POSTGRES (each test in a schema of its
# own). Unset, it is this machine's server, postgres://postgres@127.0.0.1:5432/test,
# when one answers there; when none does, the PostgreSQL tests skip, with a
# note. Set it to an empty string to skip them, or to a URL to run them
# there (an unreachable server then fails them). In CI (CI=true, set by
# .ci/run) they must run.
#
# The race detector needs cgo and a C compiler; Go alone has neither. Where
# they are missing, outside CI, the tests run without -race, with a note.
set -euo pipefail
cd "$(dirname "$0")/.."
ci=false
[ "${CI:-}" = true ] && ci=true

if [ -z "${ROTOR_TEST_POSTGRES+set}" ]; then
  if $ci || (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
    export ROTOR_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test
  else
    echo "test.sh: no PostgreSQL answers at 127.0.0.1:5432: its tests skip (set ROTOR_TEST_POSTGRES to run them)" >&2
    export ROTOR_TEST_POSTGRES=
  fi
fi
if [ -n "$ROTOR_TEST_POSTGRES" ] && command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -d "$ROTOR_TEST_POSTGRES"; then
  if $ci; then
    echo "test.sh: cannot reach the test PostgreSQL (ROTOR_TEST_POSTGRES); CI must run its tests" >&2
    exit 1
  fi
  echo "test.sh: the test PostgreSQL is not reachable; its tests will fail (set ROTOR_TEST_POSTGRES= to skip them)" >&2
fi

race=-race
cc=$(go env CC)
if [ "$(go env CGO_ENABLED)" != 1 ] || ! command -v "${cc%% *}" >/dev/null 2>&1; then
  if $ci; then
    echo "test.sh: the race detector needs cgo and a C compiler ($cc); CI must run it" >&2
    exit 1
  fi
  echo "test.sh: no C compiler ($cc) or cgo off: running the tests without the race detector" >&2
  race=
fi
exec go test $race "$@" ./...
