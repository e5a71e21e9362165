#!/usr/bin/env bash
# The learned-cooldown simulation of issue 19: the real pool (Select and
# Record, the learner wired in) on a fake clock, three credentials, against
# providers whose reset is hidden, for the fixed 60 s cooldown, a doubling
# ladder, the learner as the spec writes it, as rotor applies it, and with
# learned_cooldown.adapt on.
#
#   scripts/sim-cooldown.sh                         every scenario at 0.2, 1 and 5 requests/s, 12 h each
#   scripts/sim-cooldown.sh --schedule "0:120,3600:40,7200:200"   your own reset schedule (seconds:reset)
#   scripts/sim-cooldown.sh --seed 7 --random 3     another seed, plus three random schedules
#   scripts/sim-cooldown.sh --span 30m --rates 1    quick
#   scripts/sim-cooldown.sh --scenarios "bursty,noisy"              only these built-in scenarios
#                                                   ("none" with --random N: only the random schedules)
#   scripts/sim-cooldown.sh --seeds 16 --random 2   seeds 1-16, two random schedules of its own each:
#                                                   the mean table (per scenario and rate: mean and worst
#                                                   margin, cells and points lost, worst waste ratio)
#   scripts/sim-cooldown.sh --seeds 16 --random 2 --chance 100ms   also how far rounding adapt's
#                                                   cooldowns up to 100 ms moves each row: chance
#   scripts/sim-cooldown.sh --seeds 16 --random 2 --oracle   also a cooldown told each reset:
#                                                   the best any cooldown could do, its own mean table
#   scripts/sim-cooldown.sh --seeds 16 --scenarios noisy --retries 145,175,195,200   also a policy
#                                                   told when to retry (seconds after the first throttle):
#                                                   what knowing noisy's distribution is worth, its own mean table
#   scripts/sim-cooldown.sh --scenarios none --random 2 --seeds 16 --runs   also idle and refusals
#                                                   per episode by how long the reset had held, then by how it changed
#   scripts/sim-cooldown.sh --seeds 48 --scenarios noisy --rates 0.2 --lost   also each policy's requests
#                                                   not served, those lost to idle time, and what an idle hour cost
#   scripts/sim-cooldown.sh --seeds 48 --scenarios noisy --rates 0.2 --credentials   also each policy's
#                                                   requests served, wasted 429s and idle time per credential
#   scripts/sim-cooldown.sh --failover=false        one call per request (issue 19's first measurements);
#                                                   by default a refused request fails over as the route does
#
# The last line is, exactly:
#
#   learned_min_served_margin_pp=X learned_max_waste_ratio=Y
#
# for learned adapt against fixed 60 s over every cell (the waste ratio
# over the cells where fixed wasted any). It prints a markdown table before
# it; `scripts/sim-cooldown.sh -h` lists the flags.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/rotor-sim" ./cmd/rotor-sim
"$bin/rotor-sim" "$@"
