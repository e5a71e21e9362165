#!/usr/bin/env bash
# Set (or replace) the daily tokens budget. Safe to run from cron as often
# as you like: --replace makes it idempotent.
#
#   ROTOR_DAILY_TOKENS  tokens per UTC day (default 1000000)
#   ROTOR_BUDGET_NAME   budget name (default daily-tokens)
#   ROTOR               the rotor binary (default: rotor on PATH)
#
# crontab: 5 0 * * *  ROTOR_DAILY_TOKENS=2000000 /path/to/scripts/daily-budget.sh
set -euo pipefail
rotor=${ROTOR:-rotor}
tokens=${ROTOR_DAILY_TOKENS:-1000000}
name=${ROTOR_BUDGET_NAME:-daily-tokens}
exec "$rotor" budget add --tokens "$tokens" --window day --name "$name" --replace
