#!/usr/bin/env bash
# The README's Quick start, step by step, against `rotor fake-provider`, in a
# temporary home folder of its own (never yours; every ROTOR_* variable but
# ROTOR, and the spec's cooldown variables, are ignored): init, the fake provider,
# its pools: section pasted into rotor.yaml, config check, a budget, a
# price, the bridge (scripts/bridge-up.sh), a decision and chat completions
# (one streamed) through it, status, then the ledger report. Stops what it
# started and exits 0 when every step worked.
#
#   ROTOR          the rotor binary (default: rotor on PATH)
#   FAKE_LISTEN    the fake provider's address (default 127.0.0.1:8789)
#   BRIDGE_LISTEN  the bridge's address (default 127.0.0.1:8787)
#   QUICKSTART_KEEP=1 leaves the temporary home folder behind (its path is
#                  printed)
# Use 127.0.0.1:0 for free ports.
set -euo pipefail
rotor=${ROTOR:-rotor}
fake_listen=${FAKE_LISTEN:-127.0.0.1:8789}
bridge_listen=${BRIDGE_LISTEN:-127.0.0.1:8787}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v "$rotor" >/dev/null 2>&1; then
  echo "quickstart: no rotor binary '$rotor': go install ./cmd/rotor (into \$(go env GOPATH)/bin, on your PATH), or set ROTOR=./rotor after go build -o rotor ./cmd/rotor" >&2
  exit 2
fi

# Nothing of the caller's rotor settings reaches the run: a ROTOR_DB or
# ROTOR_LEDGER_URL would write its budget, price, token and usage rows into
# the caller's own ledger, a ROTOR_RUN_DIR would overwrite the caller's
# bridge.pid and bridge.url, a ROTOR_CONFIG would read another rotor.yaml.
for v in $(compgen -e); do
  case "$v" in
  ROTOR) ;;
  ROTOR_* | MODEL_COOLDOWN_* | LEARNED_COOLDOWN_* | INTELLIGENCE_STORAGE_BACKEND) unset "$v" ;;
  esac
done

work=$(mktemp -d "${TMPDIR:-/tmp}/rotor-quickstart.XXXXXX")
export ROTOR_HOME="$work/home"
export ROTOR="$rotor"
fake_pid=
cleanup() {
  if [ -s "$ROTOR_HOME/bridge.pid" ]; then
    kill "$(cat "$ROTOR_HOME/bridge.pid")" 2>/dev/null || true
  fi
  if [ -n "$fake_pid" ]; then kill "$fake_pid" 2>/dev/null || true; fi
  if [ "${QUICKSTART_KEEP:-}" = 1 ]; then
    echo "quickstart: files kept in $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
step() { printf '\n$ %s\n' "$*"; }

step rotor init
"$rotor" init

step "rotor fake-provider --keys 2 &"
"$rotor" fake-provider --listen "$fake_listen" --keys 2 >"$work/fake-provider.txt" 2>"$work/fake-provider.log" &
fake_pid=$!
# It says so on stderr once it has printed everything on stdout.
deadline=$((SECONDS + 30))
until grep -q 'serving on' "$work/fake-provider.log" 2>/dev/null; do
  if ! kill -0 "$fake_pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
    echo "quickstart: rotor fake-provider did not start:" >&2
    cat "$work/fake-provider.log" >&2
    exit 1
  fi
  sleep 0.1
done
cat "$work/fake-provider.txt"

step 'eval "$(grep "^export " fake-provider.txt)"'
eval "$(grep '^export ' "$work/fake-provider.txt")"

step "replace the pools: section at the end of rotor.yaml with the one printed"
cfg="$ROTOR_HOME/rotor.yaml"
sed '/^pools:/,$d' "$cfg" >"$cfg.new"
sed -n '/^pools:/,$p' "$work/fake-provider.txt" >>"$cfg.new"
mv "$cfg.new" "$cfg"
sed -n '/^pools:/,$p' "$cfg"

step rotor config check
"$rotor" config check

step rotor budget add --tokens 2000000 --window day --name daily-tokens
"$rotor" budget add --tokens 2000000 --window day --name daily-tokens

step rotor pricing set gpt-4o-mini --input 0.15 --output 0.60
"$rotor" pricing set gpt-4o-mini --input 0.15 --output 0.60

step scripts/bridge-up.sh
url=$("$here/bridge-up.sh" --listen "$bridge_listen")
echo "$url"

token=$(cat "$ROTOR_HOME/bridge.token")
step "curl $url/v1/decisions"
curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d '{"model":"api/decide-mini","input":"Is this a duplicate invoice?","question":{"type":"predicate"}}' \
  "$url/v1/decisions"
echo
step "curl $url/v1/chat/completions"
curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d '{"model":"api/gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}]}' \
  "$url/v1/chat/completions"
echo
step "curl -N $url/v1/chat/completions (stream)"
curl -fsSN -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d '{"model":"api/gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Say hello."}]}' \
  "$url/v1/chat/completions"

step rotor status
"$rotor" status

step rotor ledger report --by operation,model
"$rotor" ledger report --by operation,model

step "stop the bridge and the fake provider"
# The pid file goes with the kill: the exit trap must not signal that pid
# again once the bridge is gone (the system may have given it to another
# process by then).
bridge_pid=$(cat "$ROTOR_HOME/bridge.pid")
rm -f "$ROTOR_HOME/bridge.pid"
kill "$bridge_pid"
kill "$fake_pid"
rc=0
wait "$fake_pid" || rc=$?
fake_pid=
# The bridge is no child of this shell (bridge-up.sh started it): wait for
# it to finish its drain and close the ledger before the exit trap removes
# its folder.
deadline=$((SECONDS + 20))
while kill -0 "$bridge_pid" 2>/dev/null; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "quickstart: the bridge (pid $bridge_pid) did not stop within 20s of SIGTERM" >&2
    exit 1
  fi
  sleep 0.1
done
if [ "$rc" -ne 0 ]; then
  echo "quickstart: rotor fake-provider exited $rc on SIGTERM, want 0" >&2
  exit 1
fi
echo "quickstart: ok"
