#!/usr/bin/env bash
# Send one decision through the bridge with curl and print the answer.
#
#   decide.sh MODEL INPUT        e.g. decide.sh api/decide-mini "Is this spam?"
#
#   ROTOR_URL    the bridge URL, a trailing slash or not (default: bridge.url
#                in the rotor home, else http://127.0.0.1:8787)
#   ROTOR_TOKEN  the client token (default: bridge.token in the rotor home)
# Exits non-zero on an HTTP error, after printing rotor's JSON error.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: decide.sh MODEL INPUT" >&2
  exit 2
fi
home=${ROTOR_HOME:-${XDG_CONFIG_HOME:-$HOME/.config}/rotor}
url=${ROTOR_URL:-}
if [ -z "$url" ] && [ -s "${ROTOR_RUN_DIR:-$home}/bridge.url" ]; then
  url=$(head -n 1 "${ROTOR_RUN_DIR:-$home}/bridge.url")
fi
url=${url:-http://127.0.0.1:8787}
url=${url%/}
token=${ROTOR_TOKEN:-}
if [ -z "$token" ]; then
  token=$(cat "$home/bridge.token")
fi
# JSON-escape the arguments without jq: the backslash, the quote and
# every control character (text from a PDF carries form feeds).
json_string() {
  local s=$1 h c i
  s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\r'/\\r}; s=${s//$'\t'/\\t}
  for ((i = 1; i < 32; i++)); do
    printf -v h '%02x' "$i"
    printf -v c "\\x$h"
    if [[ $s == *"$c"* ]]; then s=${s//"$c"/\\u00$h}; fi
  done
  printf '"%s"' "$s"
}
body="{\"model\":$(json_string "$1"),\"input\":$(json_string "$2"),\"question\":{\"type\":\"predicate\"}}"
# The token goes through a header file on stdin, never the command line;
# the body through fd 3 (printf is a builtin), so no argument limit applies.
printf 'Authorization: Bearer %s\n' "$token" |
  curl -sS --fail-with-body -H @- -H 'Content-Type: application/json' --data-binary @/dev/fd/3 "$url/v1/decisions" \
    3< <(printf '%s' "$body")
echo
