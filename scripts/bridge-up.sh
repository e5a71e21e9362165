#!/usr/bin/env bash
# Start the bridge in the background and wait until it answers /healthz.
# Prints the bridge URL on stdout; extra arguments go to `rotor bridge start`
# (for example --listen 127.0.0.1:0 for a free port).
#
# Files, in $ROTOR_RUN_DIR (default: the rotor home folder):
#   bridge.pid  the bridge's process id (stop it with: kill "$(cat bridge.pid)")
#   bridge.url  the URL it serves
#   bridge.log  its log
# The bridge itself records its pid and URL in <home>/bridge.json while it
# runs, which is how `rotor status` finds it on a free port.
#
#   ROTOR           the rotor binary (default: rotor on PATH)
#   ROTOR_WAIT      seconds to wait for the bridge (default 30)
set -euo pipefail
rotor=${ROTOR:-rotor}
dir=${ROTOR_RUN_DIR:-${ROTOR_HOME:-${XDG_CONFIG_HOME:-$HOME/.config}/rotor}}
wait_s=${ROTOR_WAIT:-30}
mkdir -p "$dir"
chmod 700 "$dir"
: >"$dir/bridge.url"
"$rotor" bridge start "$@" >"$dir/bridge.url" 2>"$dir/bridge.log" &
pid=$!
echo "$pid" >"$dir/bridge.pid"

deadline=$((SECONDS + wait_s))
while [ ! -s "$dir/bridge.url" ]; do
  if ! kill -0 "$pid" 2>/dev/null; then
    rc=0; wait "$pid" || rc=$?
    echo "bridge-up: rotor bridge start exited with status $rc:" >&2
    cat "$dir/bridge.log" >&2
    exit "$rc"
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "bridge-up: no URL from the bridge after ${wait_s}s; see $dir/bridge.log" >&2
    exit 1
  fi
  sleep 0.1
done
url=$(head -n 1 "$dir/bridge.url")
until curl -fsS --max-time 2 "$url/healthz" >/dev/null 2>&1; do
  if ! kill -0 "$pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
    echo "bridge-up: $url does not answer /healthz; see $dir/bridge.log" >&2
    exit 1
  fi
  sleep 0.1
done
echo "$url"
