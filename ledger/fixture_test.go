package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
)

// Benchmark fixtures: ledgers of n usage rows written with bulk SQL straight
// into usage and its rollups (usage_minute, usage_hour, usage_hour_dims),
// because writing 10,000,000 rows through the writer would take hours.
// TestFixtureRollupsMatchWriter proves the bulk rollups are the ones the
// writer keeps.

// fixtureVersion names the cached fixture files; bump it when the builder
// or the schema changes.
const fixtureVersion = 2

// fixtureAnchor is the end of every fixture: rows lie in
// [fixtureAnchor-span, fixtureAnchor). It is fixed, so that every machine
// measures the same windows, and sits inside a minute and an hour, so that
// windows ending there have raw edges. `--since 400d` reaches back past its
// 90 days until September 2027.
var fixtureAnchor = time.Date(2026, 11, 27, 15, 42, 17, 345_000_000, time.UTC)

// benchSpan is how far back the benchmark fixtures reach.
const benchSpan = 90 * 24 * time.Hour

// fixtureSpec describes a fixture.
type fixtureSpec struct {
	Rows int
	Span time.Duration // rows lie in [fixtureAnchor-Span, fixtureAnchor)
}

func (f fixtureSpec) from() int64 { return fixtureAnchor.Add(-f.Span).UnixMilli() }

// rawDSN opens a fixture without the ledger, for bulk loading and resets.
// The driver ("sqlite") is registered by package ledger.
func rawDSN(path string, bulk bool) string {
	dsn := path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)"
	if bulk {
		dsn += "&_pragma=synchronous(OFF)&_pragma=cache_size(-1048576)&_pragma=temp_store(MEMORY)"
	}
	return dsn
}

// The generator: Lehmer steps (x*48271 mod 2^31-1, which never overflows
// SQLite's 64-bit integers) give each row five independent-looking values.
// Request ids are random 32-hex strings like httpx.NewRequestID makes, so
// the UNIQUE index on request_id is as scattered as a real one. About 0.5%
// of the rows are reservations never settled; 4% end in 429 or 5xx with
// unknown tokens; 3% of the 200s have unreadable usage (NULL tokens); cost
// is unknown (NULL) on a third of the rest.
const fixtureInsert = `WITH RECURSIVE
seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n + 1 < :rows),
g1 AS (SELECT n, ((n + 1) * 48271) % 2147483647 AS h1 FROM seq),
g2 AS (SELECT n, h1, (h1 * 48271) % 2147483647 AS h2 FROM g1),
g3 AS (SELECT n, h1, h2, (h2 * 48271) % 2147483647 AS h3 FROM g2),
g4 AS (SELECT n, h1, h2, h3, (h3 * 48271) % 2147483647 AS h4 FROM g3),
g5 AS (SELECT n, h1, h2, h3, h4, (h4 * 48271) % 2147483647 AS h5 FROM g4),
r AS (
  SELECT n,
    :from + (n * :span) / :rows + h1 % MAX(1, :span / :rows) AS ts,
    CASE WHEN h2 % 1000 < 5 THEN 0 WHEN h2 % 1000 < 25 THEN 429 WHEN h2 % 1000 < 40 THEN 502
         WHEN h2 % 1000 < 50 THEN 500 WHEN h2 % 1000 < 60 THEN 400 ELSE 200 END AS status,
    CASE WHEN h3 % 100 < 40 THEN 'gpt-4o-mini' WHEN h3 % 100 < 65 THEN 'gpt-4o' WHEN h3 % 100 < 80 THEN 'claude-sonnet'
         WHEN h3 % 100 < 90 THEN 'claude-haiku' WHEN h3 % 100 < 96 THEN 'gemini-pro' ELSE 'llama-70b' END AS model,
    h4 % 3000 AS input, (h4 / 3000) % 800 AS output,
    (h5 / 7) % 100 AS unk,
    h1, h5
  FROM g5)
INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, pool, model, credential, region, client, attempts, status, error_code,
  input_tokens, output_tokens, total_tokens, cost_micros, latency_ms)
SELECT lower(hex(randomblob(16))), ts, status <> 0, ts + 600000, 'decisions', 'api', model,
  CASE WHEN status = 0 THEN '' ELSE 'team-' || (h5 % 6) END,
  '',
  CASE (h5 / 6) % 4 WHEN 0 THEN 'default' WHEN 1 THEN 'cli' WHEN 2 THEN 'ci' ELSE 'notebook' END,
  CASE WHEN status = 0 THEN 0 ELSE 1 + (h5 % 11 = 0) END,
  status,
  CASE status WHEN 429 THEN 'rate_limited' WHEN 502 THEN 'upstream_error' WHEN 500 THEN 'upstream_error' WHEN 400 THEN 'invalid_request' ELSE '' END,
  CASE WHEN status IN (200, 400) AND unk >= 3 THEN input END,
  CASE WHEN status IN (200, 400) AND unk >= 3 THEN output END,
  CASE WHEN status IN (200, 400) AND unk >= 3 THEN input + output END,
  CASE WHEN status IN (200, 400) AND unk >= 36 THEN (input + 4 * output) * 3 END,
  CASE WHEN status = 0 THEN NULL ELSE 200 + h1 % 3000 END
FROM r`

// fixtureRollups rebuild the rollups of every bucket from :bucket (in
// minutes for usage_minute, hours for the others) on from raw rows, the
// way the writer keeps them: a reservation counts one request of unknown
// tokens and cost; errors are rows settled with a status >= 400 or none, or an error code.
var fixtureRollups = []string{
	`DELETE FROM usage_minute WHERE bucket >= :minute`,
	`INSERT INTO usage_minute (bucket, requests, tokens, tokens_null, cost_micros, cost_null)
SELECT ts_ms / 60000, COUNT(*), COALESCE(SUM(total_tokens), 0), COUNT(*) - COUNT(total_tokens), COALESCE(SUM(cost_micros), 0), COUNT(*) - COUNT(cost_micros)
FROM usage WHERE ts_ms >= :minute * 60000 GROUP BY 1`,
	`DELETE FROM usage_hour WHERE bucket >= :hour`,
	`INSERT INTO usage_hour (bucket, requests, tokens, tokens_null, cost_micros, cost_null)
SELECT ts_ms / 3600000, COUNT(*), COALESCE(SUM(total_tokens), 0), COUNT(*) - COUNT(total_tokens), COALESCE(SUM(cost_micros), 0), COUNT(*) - COUNT(cost_micros)
FROM usage WHERE ts_ms >= :hour * 3600000 GROUP BY 1`,
	`DELETE FROM usage_hour_dims WHERE bucket >= :hour`,
	`INSERT INTO usage_hour_dims (bucket, operation, model, credential, client, status, requests, input_tokens, output_tokens, total_tokens, tokens_null, cost_micros, cost_null, errors, input_null, output_null,
  cached_input_tokens, cached_null, reasoning_tokens, reasoning_null)
SELECT ts_ms / 3600000, operation, model, credential, client, status,
  COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), COALESCE(SUM(total_tokens), 0), COUNT(*) - COUNT(total_tokens),
  COALESCE(SUM(cost_micros), 0), COUNT(*) - COUNT(cost_micros), SUM(status >= 400 OR status = 0 OR error_code <> ''), COUNT(*) - COUNT(input_tokens), COUNT(*) - COUNT(output_tokens),
  COALESCE(SUM(cached_input_tokens), 0), COUNT(*) - COUNT(cached_input_tokens), COALESCE(SUM(reasoning_tokens), 0), COUNT(*) - COUNT(reasoning_tokens)
FROM usage WHERE ts_ms >= :hour * 3600000 AND state = 1 GROUP BY 1, 2, 3, 4, 5, 6`,
	// The hour rollup as the writer leaves it at fixtureAnchor (migration
	// 0005): written up to the hour before the anchor's.
	fmt.Sprintf(`DELETE FROM usage_hour WHERE bucket >= %d`, fixtureAnchor.UnixMilli()/hourMS-1),
	fmt.Sprintf(`UPDATE meta SET value = %d WHERE key = 'hour_rollup_until'`, fixtureAnchor.UnixMilli()/hourMS-1),
	// Every row is folded (migration 0006).
	`UPDATE meta SET value = (SELECT COALESCE(MAX(ts_ms) + 1, 0) FROM usage) WHERE key = 'fold_until'`,
}

// buildFixture creates a ledger at path (which must not exist) holding
// spec's rows and their rollups.
func buildFixture(ctx context.Context, path string, spec fixtureSpec) error {
	if spec.Rows <= 0 || spec.Span < time.Duration(spec.Rows)*time.Millisecond {
		return fmt.Errorf("fixture: want rows > 0 and at least 1ms of span per row, not %d rows over %s", spec.Rows, spec.Span)
	}
	// Open applies the migrations, so the schema is the binary's.
	s, err := ledger.Open(ctx, path, ledger.Options{})
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	return rewriteFixture(ctx, path, true, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, fixtureInsert,
			sql.Named("rows", spec.Rows), sql.Named("from", spec.from()), sql.Named("span", spec.Span.Milliseconds())); err != nil {
			return fmt.Errorf("fixture rows: %w", err)
		}
		for _, q := range fixtureRollups {
			if _, err := tx.ExecContext(ctx, q, sql.Named("minute", 0), sql.Named("hour", 0)); err != nil {
				return fmt.Errorf("fixture rollups: %w", err)
			}
		}
		return nil
	})
}

// rewriteFixture runs fn in one transaction on the fixture at path (bulk:
// with the bulk-load pragmas of rawDSN), commits, and truncates the WAL so
// that the file alone is the fixture.
func rewriteFixture(ctx context.Context, path string, bulk bool, fn func(tx *sql.Tx) error) error {
	db, err := sql.Open("sqlite", rawDSN(path, bulk))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	return err
}

// resetFixture deletes the rows written at or after fixtureAnchor (by a
// benchmark) and every budget, and rebuilds the rollups of the buckets
// those rows touched, so that a fixture is exactly what buildFixture made.
func resetFixture(ctx context.Context, path string) error {
	anchor := fixtureAnchor.UnixMilli()
	return rewriteFixture(ctx, path, false, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM usage WHERE ts_ms >= ?`, anchor); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM budgets`); err != nil {
			return err
		}
		for _, q := range fixtureRollups {
			if _, err := tx.ExecContext(ctx, q, sql.Named("minute", anchor/60000), sql.Named("hour", anchor/3600000)); err != nil {
				return err
			}
		}
		return nil
	})
}

// cachedFixture returns the path of a fixture of rows rows over benchSpan
// under os.TempDir(), building it on first use (10,000,000 rows take a few
// minutes and about 2 GiB) and resetting it before every use.
func cachedFixture(tb testing.TB, rows int) string {
	tb.Helper()
	ctx := context.Background()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("rotor-bench-v%d-s%d-%d.db", fixtureVersion, ledger.SchemaVersion(), rows))
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		tmp := fmt.Sprintf("%s.building-%d", path, os.Getpid())
		removeDB(tmp)
		began := time.Now()
		if err := buildFixture(ctx, tmp, fixtureSpec{Rows: rows, Span: benchSpan}); err != nil {
			removeDB(tmp)
			tb.Fatalf("build fixture %s: %v", path, err)
		}
		// Rename only a complete, checkpointed file; a concurrent builder
		// loses the race harmlessly.
		if err := os.Rename(tmp, path); err != nil {
			removeDB(tmp)
			tb.Fatal(err)
		}
		removeDB(tmp)
		tb.Logf("built %s (%d rows) in %s", path, rows, time.Since(began).Round(time.Second))
	} else if err != nil {
		tb.Fatal(err)
	}
	if err := resetFixture(ctx, path); err != nil {
		tb.Fatalf("reset fixture %s: %v", path, err)
	}
	return path
}

var (
	fixtureRows = flag.Int("ledger.fixture-rows", 0, "TestBenchFixture builds (once) and resets the cached benchmark fixture of this many rows")
	fixtureOut  = flag.String("ledger.fixture-out", "", "TestBenchFixture also copies the fixture to this new file")
)

// TestBenchFixture builds or resets the cached benchmark fixture of
// -ledger.fixture-rows rows and, with -ledger.fixture-out, copies it there,
// for scripts/bench-ledger.sh. Without -ledger.fixture-rows it is skipped.
func TestBenchFixture(t *testing.T) {
	if *fixtureRows <= 0 {
		t.Skip("no -ledger.fixture-rows")
	}
	src := cachedFixture(t, *fixtureRows)
	if *fixtureOut == "" {
		return
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(*fixtureOut, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %d rows in [%s, %s)", *fixtureOut, *fixtureRows, fixtureAnchor.Add(-benchSpan).Format(time.RFC3339), fixtureAnchor.Format(time.RFC3339))
}

func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
}

// TestFixtureRollupsMatchWriter proves the bulk fixture consistent with
// the writer: on a small fixture plus rows written through the writer into
// the same buckets, (1) every rollup the writer kept equals the fixture's
// GROUP BY rebuild of it, (2) window totals from rollups and raw edges
// equal a brute-force raw sum (NULLs counted, never read as 0), and (3)
// reports equal a raw GROUP BY, for random windows.
func TestFixtureRollupsMatchWriter(t *testing.T) {
	ctx := context.Background()
	rows, writes, windows, reports := 5000, 400, 300, 40
	if raceEnabled {
		rows, writes, windows, reports = 1000, 80, 40, 8
	}
	path := filepath.Join(t.TempDir(), "fixture.db")
	spec := fixtureSpec{Rows: rows, Span: 3 * 24 * time.Hour}
	if err := buildFixture(ctx, path, spec); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(fixtureAnchor)
	// synchronous=normal: the same writer, without an fsync per commit.
	s := ledgertest.OpenAt(t, path, ledger.Options{Clock: clk, Synchronous: "normal"})

	// Rows through the writer, from the fixture's last hour on, with the
	// fixture's mix: settled, failed, unknown tokens or cost, released,
	// left open.
	rng := rand.New(rand.NewSource(3))
	clk.Set(fixtureAnchor.Add(-50 * time.Minute))
	for i := 0; i < writes; i++ {
		clk.Advance(time.Duration(rng.Int63n(int64(30 * time.Second))).Truncate(time.Millisecond))
		id := fmt.Sprintf("w%d", i)
		models := []string{"gpt-4o", "gpt-4o-mini", "claude-haiku"}
		if err := s.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: "decisions", Pool: "api",
			Model: models[rng.Intn(3)], Client: []string{"default", "ci"}[rng.Intn(2)], Expires: clk.Now().Add(time.Hour)}, nil); err != nil {
			t.Fatal(err)
		}
		st := ledger.Settlement{RequestID: id, Model: models[rng.Intn(3)], Credential: fmt.Sprintf("team-%d", rng.Intn(3)), Attempts: 1, Status: 200}
		switch k := rng.Intn(10); {
		case k == 0: // left open
			continue
		case k == 1:
			if err := s.Release(ctx, id); err != nil {
				t.Fatal(err)
			}
			continue
		case k == 2:
			st.Status, st.ErrorCode = 502, "upstream_error"
		case k == 3:
			st.Status = 400
			st.InputTokens = ledger.Known(rng.Int63n(100))
		default:
			in, out := rng.Int63n(3000), rng.Int63n(800)
			st.InputTokens, st.OutputTokens, st.TotalTokens = ledger.Known(in), ledger.Known(out), ledger.Known(in+out)
			if k > 5 {
				st.CostMicros = ledger.Known((in + 4*out) * 3)
			}
		}
		if err := s.Settle(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	end := clk.Now().Add(time.Minute)

	db, err := sql.Open("sqlite", rawDSN(path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// (1) Rollups kept by the writer equal the fixture's rebuild from the
	// rows before the fold frontier; the hour rollup for the hours it has
	// written.
	var hourUntil, foldUntil int64
	if err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'hour_rollup_until'`).Scan(&hourUntil); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'fold_until'`).Scan(&foldUntil); err != nil {
		t.Fatal(err)
	}
	if foldUntil <= fixtureAnchor.Add(-50*time.Minute).UnixMilli() {
		t.Fatalf("fold_until = %d: the writer never folded its rows", foldUntil)
	}
	for _, table := range []string{"usage_minute", "usage_hour", "usage_hour_dims"} {
		var rollupSQL string
		for _, q := range fixtureRollups {
			if strings.HasPrefix(q, "INSERT INTO "+table+" ") {
				_, rollupSQL, _ = strings.Cut(q, "\nSELECT ")
				rollupSQL = "SELECT " + rollupSQL
			}
		}
		if rollupSQL == "" {
			t.Fatalf("no rebuild query for %s", table)
		}
		rebuild := strings.NewReplacer(":minute", "0", ":hour", "0").Replace(rollupSQL)
		rebuild = strings.Replace(rebuild, "FROM usage WHERE ", fmt.Sprintf("FROM usage WHERE ts_ms < %d AND ", foldUntil), 1)
		stored := "SELECT * FROM " + table + " WHERE requests <> 0"
		if table == "usage_hour" {
			rebuild = strings.Replace(rebuild, " GROUP BY 1", fmt.Sprintf(" AND ts_ms < %d GROUP BY 1", hourUntil*hourMS), 1)
			stored += fmt.Sprintf(" AND bucket < %d", hourUntil)
		}
		for _, q := range []string{stored + " EXCEPT " + rebuild, rebuild + " EXCEPT " + stored} {
			var n int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM ("+q+")").Scan(&n); err != nil {
				t.Fatalf("%s: %v", table, err)
			}
			if n != 0 {
				t.Errorf("%s: %d rows differ between the writer's rollup and the fixture's rebuild (%s)", table, n, q)
			}
		}
	}

	// (2) Window totals equal a brute-force raw sum.
	from, span := spec.from()-hourMS, end.UnixMilli()-spec.from()+hourMS
	for i := 0; i < windows; i++ {
		f := from + rng.Int63n(span)
		to := f + rng.Int63n(span)
		switch i % 5 {
		case 0:
			f -= f % minuteMS // a whole-minute edge
		case 1:
			to = f + rng.Int63n(2*minuteMS) // inside a minute or two
		case 2:
			// A window ending now, as admission asks, with rows after now
			// in the same minute (another process's clock ahead).
			now := from + rng.Int63n(span)
			clk.Set(time.UnixMilli(now))
			f, to = now-rng.Int63n(40*24*hourMS), now+1
		}
		var want ledger.Totals
		err := db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(total_tokens), 0), COUNT(*) - COUNT(total_tokens), COALESCE(SUM(cost_micros), 0), COUNT(*) - COUNT(cost_micros)
FROM usage WHERE ts_ms >= ? AND ts_ms < ?`, f, to).Scan(&want.Requests, &want.Tokens, &want.TokensUnknown, &want.CostMicros, &want.CostUnknown)
		if err != nil {
			t.Fatal(err)
		}
		w := ledger.Window{From: time.UnixMilli(f).UTC(), To: time.UnixMilli(to).UTC()}
		var got ledger.Totals
		if err := s.View(ctx, func(r ledger.WindowReader) error {
			got, err = r.Totals(w)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("Totals[%s, %s) = %+v, want %+v (raw sum)", w.From, w.To, got, want)
		}
	}

	// (3) Reports equal a raw GROUP BY.
	keySets := [][]string{{ledger.KeyModel, ledger.KeyDay}, {ledger.KeyOperation}, {ledger.KeyCredential, ledger.KeyStatus}, ledger.ReportKeys}
	for i := 0; i < reports; i++ {
		f := from + rng.Int63n(span)
		to := f + rng.Int63n(span)
		if i%4 == 0 {
			f, to = from, end.UnixMilli()
		}
		by := keySets[i%len(keySets)]
		q := ledger.ReportQuery{From: time.UnixMilli(f).UTC(), To: time.UnixMilli(to).UTC(), By: by}
		got, err := s.Report(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want := rawReport(t, db, q)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Report(%v, [%s, %s)) =\n%v\nwant (raw)\n%v", by, q.From, q.To, got, want)
		}
	}
}

const (
	minuteMS = int64(time.Minute / time.Millisecond)
	hourMS   = int64(time.Hour / time.Millisecond)
)

// rawReport is Report computed from raw rows only.
func rawReport(t *testing.T, db *sql.DB, q ledger.ReportQuery) []ledger.ReportRow {
	t.Helper()
	cols := map[string]string{
		ledger.KeyOperation: "operation", ledger.KeyModel: "model", ledger.KeyCredential: "credential", ledger.KeyClient: "client",
		ledger.KeyDay: "strftime('%Y-%m-%d', ts_ms / 1000, 'unixepoch')", ledger.KeyStatus: "CASE status WHEN 0 THEN 'unsettled' ELSE CAST(status AS TEXT) END",
	}
	var sel []string
	for _, k := range q.By {
		sel = append(sel, cols[k])
	}
	keys := strings.Join(sel, ", ")
	rows, err := db.Query(`SELECT `+keys+`, COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), COALESCE(SUM(total_tokens), 0),
  COUNT(*) - COUNT(total_tokens), COALESCE(SUM(cost_micros), 0), COUNT(*) = COUNT(cost_micros), SUM(state = 1 AND (status >= 400 OR status = 0 OR error_code <> '')),
  COUNT(*) - COUNT(input_tokens), COUNT(*) - COUNT(output_tokens),
  COALESCE(SUM(cached_input_tokens), 0), COUNT(*) - COUNT(cached_input_tokens), COALESCE(SUM(reasoning_tokens), 0), COUNT(*) - COUNT(reasoning_tokens),
  COUNT(*) - COUNT(cost_micros)
FROM usage WHERE ts_ms >= ? AND ts_ms < ? GROUP BY `+keys+` ORDER BY `+keys, q.From.UnixMilli(), q.To.UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := []ledger.ReportRow{}
	for rows.Next() {
		r := ledger.ReportRow{Keys: make([]string, len(q.By))}
		dest := []any{}
		for i := range r.Keys {
			dest = append(dest, &r.Keys[i])
		}
		dest = append(dest, &r.Requests, &r.InputTokens, &r.OutputTokens, &r.TotalTokens, &r.TokensUnknown, &r.CostMicros, &r.CostKnown, &r.Errors, &r.InputUnknown, &r.OutputUnknown,
			&r.CachedInputTokens, &r.CachedUnknown, &r.ReasoningTokens, &r.ReasoningUnknown, &r.CostUnknown)
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
