#!/usr/bin/env bash
# Print yesterday's usage (UTC) as CSV, one row per model and credential.
# Pipe it to a file or a mail command from a nightly cron job.
#
#   ROTOR  the rotor binary (default: rotor on PATH)
set -euo pipefail
rotor=${ROTOR:-rotor}
exec "$rotor" ledger report --from yesterday --to today --by model,credential --format csv
