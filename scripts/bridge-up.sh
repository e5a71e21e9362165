#!/usr/bin/env bash
# Start the bridge in the background and wait until it answers /healthz.
# Prints the bridge URL on stdout; extra arguments go to `rotor bridge start`
# (for example --listen 127.0.0.1:0 for a free port).
#
# Files, in $ROTOR_RUN_DIR (default: the rotor home folder: --home among the
# arguments, else $ROTOR_HOME, else ~/.config/rotor):
#   bridge.pid  the bridge's process id (stop it with: kill "$(cat bridge.pid)")
#   bridge.url  the URL it serves
#   bridge.log  its log
# A bridge they name that still runs and answers is left running: its URL
# is printed and nothing starts (run it from cron to keep a bridge up; to
# start one with other flags, stop the running one first). Otherwise they
# are replaced only once the new bridge answers: a start that fails (the
# port is taken, say) leaves the files alone. A bridge that does not answer
# in time is stopped.
# The bridge itself records its pid and URL in <home>/bridge.json while it
# runs, which is how `rotor status` finds it on a free port.
#
#   ROTOR           the rotor binary (default: rotor on PATH)
#   ROTOR_WAIT      seconds to wait for the bridge (default 30)
set -euo pipefail
rotor=${ROTOR:-rotor}
home=${ROTOR_HOME:-${XDG_CONFIG_HOME:-$HOME/.config}/rotor}
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
  --home=*) home=${args[i]#--home=} ;;
  --home) if ((i + 1 < ${#args[@]})); then home=${args[i + 1]}; fi ;;
  esac
done
dir=${ROTOR_RUN_DIR:-$home}
wait_s=${ROTOR_WAIT:-30}
if ! [[ $wait_s =~ ^[0-9]+$ ]]; then
  echo "bridge-up: ROTOR_WAIT must be whole seconds, not '$wait_s'" >&2
  exit 2
fi
# Only a folder made here gets mode 0700: one the user named (a shared run
# folder, /tmp, $HOME) keeps its mode; the files written in it are 0600.
if [ ! -d "$dir" ]; then
  mkdir -p "$dir"
  chmod 700 "$dir"
fi
if [ -s "$dir/bridge.pid" ] && [ -s "$dir/bridge.url" ]; then
  old_pid=$(head -n 1 "$dir/bridge.pid")
  old_url=$(head -n 1 "$dir/bridge.url")
  if [[ $old_pid =~ ^[0-9]+$ ]] && kill -0 "$old_pid" 2>/dev/null &&
    curl -fsS --max-time 2 "$old_url/healthz" >/dev/null 2>&1; then
    echo "bridge-up: a bridge already runs (pid $old_pid, $dir/bridge.pid); left it running" >&2
    echo "$old_url"
    exit 0
  fi
fi
deadline=$((SECONDS + 10#$wait_s))
new_url=$(mktemp "$dir/bridge.url.XXXXXX")
new_log=$(mktemp "$dir/bridge.log.XXXXXX")
"$rotor" bridge start "$@" >"$new_url" 2>"$new_log" &
pid=$!

# fail stops the new bridge if it still runs, shows its log and removes
# its files; the files of a bridge already running stay as they were.
fail() {
  local rc=$1 msg=$2
  kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  echo "bridge-up: $msg; its log:" >&2
  cat "$new_log" >&2
  rm -f "$new_url" "$new_log"
  exit "$rc"
}

while [ ! -s "$new_url" ]; do
  if ! kill -0 "$pid" 2>/dev/null; then
    rc=0; wait "$pid" || rc=$?
    fail "$rc" "rotor bridge start exited with status $rc"
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    fail 1 "no URL from the bridge after ${wait_s}s; stopped it"
  fi
  sleep 0.1
done
url=$(head -n 1 "$new_url")
until curl -fsS --max-time 2 "$url/healthz" >/dev/null 2>&1; do
  if ! kill -0 "$pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
    fail 1 "$url does not answer /healthz; stopped it"
  fi
  sleep 0.1
done
# The bridge keeps writing to its log and URL files through the renames.
mv -f "$new_log" "$dir/bridge.log"
mv -f "$new_url" "$dir/bridge.url"
(umask 077 && echo "$pid" >"$dir/bridge.pid")
echo "$url"
