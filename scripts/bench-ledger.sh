#!/usr/bin/env bash
# bench-ledger.sh: the ledger's performance figures of issue 2 (README,
# "Performance"): budget admission and row append with 10k and 10M rows in
# the ledger (the ratio of the medians must stay under 2), and
# `rotor ledger report --by model,day` over 1M rows through the real binary
# (under one second).
#
#   scripts/bench-ledger.sh [--quick] [--rounds N] [--benchtime D]
#
# --quick compares 10k with 1M rows instead of 10M (CI-sized: the 10M
# fixture takes minutes to build and about 2 GiB). Fixtures are built once
# with bulk SQL and cached in the temp dir (rotor-bench-v*-*.db, see
# ledger/fixture_test.go); delete them to rebuild. Benchmarks run in
# --rounds interleaved rounds (default 5), so that load from elsewhere on
# the machine hits both sizes alike; figures are medians over the rounds.
# Needs bash 4+, go and awk.
set -euo pipefail

quick=0
rounds=5
benchtime=2s
while [[ $# -gt 0 ]]; do
	case $1 in
	--quick) quick=1 ;;
	--rounds)
		rounds=${2:?--rounds needs a number}
		shift
		;;
	--benchtime)
		benchtime=${2:?--benchtime needs a duration}
		shift
		;;
	-h | --help)
		sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "bench-ledger.sh: unknown argument $1 (try --help)" >&2
		exit 2
		;;
	esac
	shift
done
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
	echo "bench-ledger.sh: --rounds wants a positive number, not $rounds" >&2
	exit 2
fi

big=10M
[[ $quick == 1 ]] && big=1M
report_rows=1000000

cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/rotor-bench-ledger.XXXXXX")
trap 'rm -rf "$work"' EXIT

now() {
	if [[ -n ${EPOCHREALTIME:-} ]]; then
		echo "${EPOCHREALTIME/,/.}"
	else
		date +%s.%N
	fi
}

echo "building the test binary and rotor..." >&2
go test -c -o "$work/ledger.test" ./ledger
go build -o "$work/rotor" ./cmd/rotor

# Build (or reuse) the fixtures before any timing, and copy the 1M one for
# the CLI.
fixture() { # rows [copy-to]
	local args=(-test.run '^TestBenchFixture$' -test.timeout 1h -ledger.fixture-rows "$1")
	[[ $# -gt 1 ]] && args+=(-ledger.fixture-out "$2")
	echo "fixture of $1 rows (built on first use; 10M takes a few minutes)..." >&2
	(cd ledger && "$work/ledger.test" "${args[@]}" >/dev/null)
}
fixture 10000
[[ $big == 10M ]] && fixture 10000000
fixture $report_rows "$work/report.db"

bench="^Benchmark(Admission|Append)(Parallel)?\$/rows=(10k|$big)\$"
for ((r = 1; r <= rounds; r++)); do
	echo "round $r of $rounds..." >&2
	for b in "$bench" '^BenchmarkReportModelDay$'; do
		(cd ledger && "$work/ledger.test" -test.run '^$' -test.bench "$b" -test.benchtime "$benchtime" -test.count 1 -test.timeout 1h) >>"$work/bench.txt"
	done
done

# The CLI over the 1M-row ledger: one warm-up run (also a check that the
# report covers every row), then one timed run per round.
export ROTOR_HOME="$work/home"
cli=("$work/rotor" --db "$work/report.db" ledger report --by model,day --since 400d --format csv)
got=$("${cli[@]}" | awk -F, 'NR > 1 { s += $3 } END { print s + 0 }')
if [[ $got != "$report_rows" ]]; then
	echo "bench-ledger.sh: the report counted $got requests, want $report_rows (is the fixture older than 400 days? bump fixtureAnchor)" >&2
	exit 1
fi
for ((r = 1; r <= rounds; r++)); do
	t0=$(now)
	"${cli[@]}" >/dev/null
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "CLIReport/rows=1M 1 %.0f ns/op\n", (b - a) * 1e9 }' >>"$work/bench.txt"
done

# Medians per benchmark (the -N GOMAXPROCS suffix dropped) of ns/op and of
# cpu-ns/op, the process's CPU time per op (steadier on a shared machine).
awk -v big="$big" '
function median(key,   n, i, j, t, v) {
	n = split(vals[key], v, " ")
	if (n == 0) return 0
	for (i = 2; i <= n; i++) { t = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function us(ns) { return sprintf("%.1f", ns / 1000) }
function ratio(a, b) { return a > 0 ? sprintf("%.2f", b / a) : "-" }
$1 ~ /^(Benchmark|CLIReport)/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	for (i = 3; i < NF; i += 2) vals[name SUBSEP $(i + 1)] = vals[name SUBSEP $(i + 1)] " " $i
}
END {
	printf "| benchmark | 10k rows | %s rows | ratio | CPU, 10k rows | CPU, %s rows | CPU ratio |\n", big, big
	printf "|---|---:|---:|---:|---:|---:|---:|\n"
	split("Admission Append AdmissionParallel AppendParallel", names, " ")
	for (i = 1; i <= 4; i++) {
		a = median(names[i] "/rows=10k" SUBSEP "ns/op"); b = median(names[i] "/rows=" big SUBSEP "ns/op")
		ca = median(names[i] "/rows=10k" SUBSEP "cpu-ns/op"); cb = median(names[i] "/rows=" big SUBSEP "cpu-ns/op")
		r[names[i]] = ratio(a, b)
		printf "| %s | %s us | %s us | %s | %s us | %s us | %s |\n", names[i], us(a), us(b), r[names[i]], us(ca), us(cb), ratio(ca, cb)
	}
	printf "\n| report by model,day over 1M rows | median |\n|---|---:|\n"
	printf "| Store.Report, whole 90 days | %.1f ms |\n", median("ReportModelDay/rows=1M/range=all" SUBSEP "ns/op") / 1e6
	printf "| Store.Report, last 24h | %.2f ms |\n", median("ReportModelDay/rows=1M/range=24h" SUBSEP "ns/op") / 1e6
	cli = median("CLIReport/rows=1M" SUBSEP "ns/op") / 1e9
	printf "| rotor ledger report --by model,day --since 400d (whole process) | %.3f s |\n\n", cli
	printf "admission_ratio_%s_vs_10k=%s append_ratio_%s_vs_10k=%s report_1M_seconds=%.3f\n", big, r["Admission"], big, r["Append"], cli
}' "$work/bench.txt"
