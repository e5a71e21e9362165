#!/usr/bin/env bash
# End-to-end benchmark of rotor against its floor (issues 7 and 16).
#
#   scripts/bench.sh            full run: 5 rounds x 10,000 requests (2,000 streams) per cell, a few minutes
#   scripts/bench.sh --quick    3 rounds x 2,000 requests (400 streams) per cell, about a minute
#   scripts/bench.sh --soak     memory: 200,000 requests through the bridge at 16 clients
#
# It builds rotor and cmd/rotor-bench, then rotor-bench starts the fake
# provider and a bare httputil.ReverseProxy (each in its own process) and
# `rotor bridge start` in a temporary home, and measures direct, bare and
# rotor at 1, 16 and 64 clients, interleaved round by round; then chat
# streams of 200 events (POST /v1/chat/completions, "stream": true) the same
# way at 1 and 16 clients, the bare proxy reading the request body first and
# flushing every write (FlushInterval -1); then rotor's RSS with 256 stalled
# streams in flight, with its Go heap and goroutine stacks. The last line of
# a benchmark run is:
#
#   throughput_ratio_c16=R throughput_ratio_c64=R added_p50_ratio_c1=R stream_throughput_ratio_c16=R stream_ttfb_ratio_c1=R stream_rss_mib_256=M
#
# Other arguments go to rotor-bench (scripts/bench.sh -h lists them), e.g.
#   scripts/bench.sh --quick -log-level info             measure with access logs
#   scripts/bench.sh -modes rotor -concurrency 16 -cpuprofile rotor.pprof   (paths are relative to the repo root;
#                                      -memprofile FILE writes the allocations profile)
#   scripts/bench.sh --quick -work /tmp/rb    keep rotor's home and the logs
#   scripts/bench.sh --quick -stream-requests 0 -stream-inflight 0   Decisions only
#   (the profile: go build -o rotor ./cmd/rotor && go tool pprof -top rotor rotor.pprof)
set -euo pipefail
cd "$(dirname "$0")/.."

args=()
for a in "$@"; do
  case "$a" in
    --quick) args+=(-quick) ;;
    --soak) args+=(-soak) ;;
    -h|--help) args+=(-h) ;;
    *) args+=("$a") ;;
  esac
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rotor-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/rotor" ./cmd/rotor
go build -o "$tmp/rotor-bench" ./cmd/rotor-bench
label=""
if rev=$(git rev-parse --short HEAD 2>/dev/null); then
  label="tree $rev"
  if ! git diff --quiet HEAD -- 2>/dev/null; then
    label="$label + uncommitted changes"
  fi
fi
"$tmp/rotor-bench" -rotor "$tmp/rotor" -work "$tmp/work" -label "$label" ${args[@]+"${args[@]}"}
