#!/usr/bin/env bash
# bench-ledger.sh: the ledger's performance figures (README, "Performance"),
# on both engines side by side: budget admission and row append, one caller
# and 16, with a small and a large ledger (SQLite: 10k and 10M rows;
# PostgreSQL: 10k and 1M), the ratios large/small per engine and
# PostgreSQL/SQLite per benchmark; and `rotor ledger report --by model,day`
# over 1M SQLite rows through the real binary.
#
#   scripts/bench-ledger.sh [--quick] [--engines sqlite,postgres] [--sqlite-big 1M|10M] [--rounds N] [--benchtime D]
#
# --quick is a check that the whole run works, in a minute or two: 10k rows
# only on both engines, one round of 50 iterations, no CLI report; it
# prints the PostgreSQL/SQLite ratios (the e2e tests run it). --sqlite-big
# 1M compares SQLite's 10k with 1M rows instead of 10M (the 10M fixture
# takes minutes to build and about 2 GiB). SQLite runs with synchronous=full
# (ROTOR_BENCH_SYNC) so that both engines make each commit durable.
# PostgreSQL is ROTOR_TEST_POSTGRES (default
# postgres://postgres@127.0.0.1:5432/test; every benchmark fills a schema of
# its own and drops it). SQLite fixtures are built once with bulk SQL and
# cached in the temp dir (rotor-bench-v*-*.db); delete them to rebuild.
# Benchmarks run in --rounds interleaved rounds (default 5), so that load
# from elsewhere on the machine hits every cell alike; figures are medians.
# Needs bash 4+, go and awk.
set -euo pipefail

quick=0
rounds=5
benchtime=2s
engines=sqlite,postgres
big=10M
rounds_set=0
benchtime_set=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--quick) quick=1 ;;
	--rounds)
		rounds=${2:?--rounds needs a number}
		rounds_set=1
		shift
		;;
	--benchtime)
		benchtime=${2:?--benchtime needs a duration or a count such as 100x}
		benchtime_set=1
		shift
		;;
	--engines)
		engines=${2:?--engines needs sqlite, postgres or both}
		shift
		;;
	--sqlite-big)
		big=${2:?--sqlite-big needs 1M or 10M}
		shift
		;;
	-h | --help)
		sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'
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
case $big in 1M | 10M) ;; *)
	echo "bench-ledger.sh: --sqlite-big wants 1M or 10M, not $big" >&2
	exit 2
	;;
esac
sqlite=0 pg=0
IFS=, read -ra want <<<"$engines"
for e in "${want[@]}"; do
	case $e in
	sqlite) sqlite=1 ;;
	postgres | postgresql | pg) pg=1 ;;
	*)
		echo "bench-ledger.sh: --engines: unknown engine $e (sqlite, postgres)" >&2
		exit 2
		;;
	esac
done
if [[ $quick == 1 ]]; then
	[[ $rounds_set == 1 ]] || rounds=1
	[[ $benchtime_set == 1 ]] || benchtime=50x
fi

report_rows=1000000
sqlite_sizes="10k|$big" pg_sizes="10k|1M" pg_big=1M
if [[ $quick == 1 ]]; then
	sqlite_sizes=10k pg_sizes=10k big=- pg_big=-
fi
export ROTOR_BENCH_SYNC=${ROTOR_BENCH_SYNC:-full}
export ROTOR_TEST_POSTGRES=${ROTOR_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test}

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

echo "building the test binaries and rotor..." >&2
[[ $sqlite == 1 ]] && go test -c -o "$work/ledger.test" ./ledger
[[ $pg == 1 ]] && go test -c -o "$work/pgledger.test" ./ledger/pgledger
[[ $sqlite == 1 && $quick == 0 ]] && go build -o "$work/rotor" ./cmd/rotor
if [[ $pg == 1 ]] && command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -d "$ROTOR_TEST_POSTGRES"; then
	echo "bench-ledger.sh: PostgreSQL (ROTOR_TEST_POSTGRES) is not reachable; start it or pass --engines sqlite" >&2
	exit 1
fi

# Build (or reuse) the SQLite fixtures before any timing, and copy the 1M
# one for the CLI.
fixture() { # rows [copy-to]
	local args=(-test.run '^TestBenchFixture$' -test.timeout 1h -ledger.fixture-rows "$1")
	[[ $# -gt 1 ]] && args+=(-ledger.fixture-out "$2")
	echo "SQLite fixture of $1 rows (built on first use; 10M takes a few minutes)..." >&2
	(cd ledger && "$work/ledger.test" "${args[@]}" >/dev/null)
}
if [[ $sqlite == 1 ]]; then
	fixture 10000
	if [[ $quick == 0 ]]; then
		[[ $big == 10M ]] && fixture 10000000
		fixture $report_rows "$work/report.db"
	fi
fi

# One benchmark run of an engine, its names prefixed with the engine.
run() { # engine binary dir regexp
	(cd "$3" && "$work/$2" -test.run '^$' -test.bench "$4" -test.benchtime "$benchtime" -test.count 1 -test.timeout 2h) |
		awk -v e="$1" '/^Benchmark/ { sub(/^Benchmark/, e ":") } { print }' >>"$work/bench.txt"
}
for ((r = 1; r <= rounds; r++)); do
	echo "round $r of $rounds..." >&2
	[[ $sqlite == 1 ]] && run sqlite ledger.test ledger "^Benchmark(Admission|Append)(Parallel)?\$/rows=($sqlite_sizes)\$"
	[[ $pg == 1 ]] && run postgres pgledger.test ledger/pgledger "^Benchmark(Admission|Append)(Parallel)?\$/rows=($pg_sizes)\$"
	[[ $sqlite == 1 && $quick == 0 ]] && run sqlite ledger.test ledger '^BenchmarkReportModelDay$'
done

if [[ $sqlite == 1 && $quick == 0 ]]; then
	# The CLI over the 1M-row ledger: one warm-up run (also a check that
	# the report covers every row), then one timed run per round.
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
		awk -v a="$t0" -v b="$t1" 'BEGIN { printf "sqlite:CLIReport/rows=1M 1 %.0f ns/op\n", (b - a) * 1e9 }' >>"$work/bench.txt"
	done
fi

# Medians per benchmark (the -N GOMAXPROCS suffix dropped) of ns/op and of
# cpu-ns/op, the process's CPU time per op (steadier on a shared machine).
awk -v big="$big" -v pgbig="$pg_big" '
function median(key,   n, i, j, t, v) {
	n = split(vals[key], v, " ")
	if (n == 0) return 0
	for (i = 2; i <= n; i++) { t = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function us(ns) { return ns > 0 ? sprintf("%.1f us", ns / 1000) : "-" }
function ratio(a, b) { return a > 0 && b > 0 ? sprintf("%.2f", b / a) : "-" }
$1 ~ /^(sqlite|postgres):/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i += 2) vals[name SUBSEP $(i + 1)] = vals[name SUBSEP $(i + 1)] " " $i
}
END {
	sizes = big != "-"
	if (sizes) {
		printf "| benchmark | SQLite 10k | SQLite %s | ratio | PostgreSQL 10k | PostgreSQL %s | ratio | PostgreSQL/SQLite, 10k |\n", big, pgbig
		printf "|---|---:|---:|---:|---:|---:|---:|---:|\n"
	} else {
		printf "| benchmark (10k rows) | SQLite | PostgreSQL | PostgreSQL/SQLite |\n|---|---:|---:|---:|\n"
	}
	split("Admission Append AdmissionParallel AppendParallel", names, " ")
	line = ""
	for (i = 1; i <= 4; i++) {
		n = names[i]
		s1 = median("sqlite:" n "/rows=10k" SUBSEP "ns/op"); s2 = median("sqlite:" n "/rows=" big SUBSEP "ns/op")
		p1 = median("postgres:" n "/rows=10k" SUBSEP "ns/op"); p2 = median("postgres:" n "/rows=" pgbig SUBSEP "ns/op")
		key = tolower(n); sub(/parallel/, "_c16", key); if (key !~ /_c16/) key = key "_c1"
		line = line sprintf("pg_vs_sqlite_%s=%s ", key, ratio(s1, p1))
		if (sizes) {
			printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", n, us(s1), us(s2), ratio(s1, s2), us(p1), us(p2), ratio(p1, p2), ratio(s1, p1)
			line = line sprintf("pg_%s_vs_10k_%s=%s sqlite_%s_vs_10k_%s=%s ", pgbig, key, ratio(p1, p2), big, key, ratio(s1, s2))
		} else {
			printf "| %s | %s | %s | %s |\n", n, us(s1), us(p1), ratio(s1, p1)
		}
	}
	cli = median("sqlite:CLIReport/rows=1M" SUBSEP "ns/op") / 1e9
	if (cli > 0) {
		printf "\n| report by model,day over 1M SQLite rows | median |\n|---|---:|\n"
		printf "| Store.Report, whole 90 days | %.1f ms |\n", median("sqlite:ReportModelDay/rows=1M/range=all" SUBSEP "ns/op") / 1e6
		printf "| Store.Report, last 24h | %.2f ms |\n", median("sqlite:ReportModelDay/rows=1M/range=24h" SUBSEP "ns/op") / 1e6
		printf "| rotor ledger report --by model,day --since 400d (whole process) | %.3f s |\n", cli
		line = line sprintf("report_1M_seconds=%.3f", cli)
	}
	printf "\n%s\n", line
}' "$work/bench.txt"
