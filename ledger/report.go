package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Report group keys.
const (
	KeyOperation  = "operation"
	KeyModel      = "model"
	KeyDay        = "day"
	KeyCredential = "credential"
	KeyClient     = "client"
	KeyStatus     = "status"
)

// ReportKeys lists the keys a report may group by.
var ReportKeys = []string{KeyOperation, KeyModel, KeyDay, KeyCredential, KeyClient, KeyStatus}

// ReportQuery asks for usage in [From, To) grouped by By.
type ReportQuery struct {
	From, To time.Time
	By       []string
}

// ReportRow is one group of a report.
type ReportRow struct {
	// Keys holds the group's value for each key of the query, in order.
	Keys         []string
	Requests     int64
	InputTokens  int64
	OutputTokens int64
	TotalTokens  int64
	// TokensUnknown, InputUnknown and OutputUnknown count the rows whose
	// total, input or output tokens are unknown (unsettled rows, answers
	// without readable usage): the group's sum of that column is then
	// unknown, not the sum of the known rows.
	TokensUnknown, InputUnknown, OutputUnknown int64
	// Cost is the known cost in micro-USD; CostKnown is false when any
	// row of the group has an unknown cost (then the total is unknown).
	CostMicros int64
	CostKnown  bool
	Errors     int64
	// CachedInputTokens and ReasoningTokens sum the rows that report
	// them; CachedUnknown and ReasoningUnknown count the rows that do not
	// (Decisions, embeddings, unsettled rows).
	CachedInputTokens, ReasoningTokens int64
	CachedUnknown, ReasoningUnknown    int64
	// CostUnknown counts the rows of unknown cost: CostMicros is then
	// the sum of the known rows only.
	CostUnknown int64
}

// StatusLabel is how a report shows a row's status: the HTTP status, or
// "unsettled" for a reservation that was never settled (in flight, or left
// by a process that died).
func StatusLabel(status int) string {
	if status == 0 {
		return "unsettled"
	}
	return strconv.Itoa(status)
}

type reportAgg struct {
	requests, input, output, total, tokensNull, cost, costNull, errors, inputNull, outputNull int64
	cached, cachedNull, reasoning, reasoningNull                                              int64
}

// add adds x to g, saturating.
func (g *reportAgg) add(x reportAgg) {
	for _, p := range [][2]*int64{
		{&g.requests, &x.requests}, {&g.input, &x.input}, {&g.output, &x.output}, {&g.total, &x.total},
		{&g.tokensNull, &x.tokensNull}, {&g.cost, &x.cost}, {&g.costNull, &x.costNull}, {&g.errors, &x.errors},
		{&g.inputNull, &x.inputNull}, {&g.outputNull, &x.outputNull}, {&g.cached, &x.cached}, {&g.cachedNull, &x.cachedNull},
		{&g.reasoning, &x.reasoning}, {&g.reasoningNull, &x.reasoningNull},
	} {
		*p[0] = SatAdd(*p[0], *p[1])
	}
}

// reportCols are the SQL expressions of the group keys, over raw usage rows
// and over the hourly rollup.
var reportCols = map[string][2]string{
	KeyOperation:  {"operation", "operation"},
	KeyModel:      {"model", "model"},
	KeyDay:        {"ts_ms / 86400000", "bucket / 24"},
	KeyCredential: {"credential", "credential"},
	KeyClient:     {"client", "client"},
	KeyStatus:     {"status", "status"},
}

// Report aggregates usage. Whole hours come from the hourly rollup; the
// partial hours at the edges, and the rows at or after the fold frontier
// that the rollup does not count yet (migration 0006), from raw rows; so
// its cost does not grow with the number of rows. SQLite groups by the
// requested keys only: grouping the rollup by all of its keys and merging
// in Go sorted and returned hundreds of thousands of rows for a 90-day
// report over 1M rows.
func (s *Store) Report(ctx context.Context, q ReportQuery) ([]ReportRow, error) {
	for _, k := range q.By {
		if !validKey(k) {
			return nil, fmt.Errorf("report: unknown group key %q (want %s)", k, strings.Join(ReportKeys, ", "))
		}
	}
	f, t := q.From.UnixMilli(), q.To.UnixMilli()
	groups := map[string]*reportAgg{}
	keyVals := map[string][]string{}
	add := func(vals []string, a reportAgg) {
		key := strings.Join(vals, "\x00")
		g, ok := groups[key]
		if !ok {
			g = &reportAgg{}
			groups[key] = g
			keyVals[key] = vals
		}
		g.add(a)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN DEFERRED"); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	// Pruned time has its rollups only (prune.go): a range that starts or
	// ends there counts whole hours, and so does one that starts or ends
	// in the partly pruned hour of a frontier inside an hour.
	var prunedUntil int64
	if err := conn.QueryRowContext(ctx, qPrunedUntil).Scan(&prunedUntil); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if p := CeilTo(prunedUntil, hourMS); f < p {
		f = FloorTo(f, hourMS)
	}
	if p := CeilTo(prunedUntil, hourMS); t < p {
		t = CeilTo(t, hourMS)
	}

	scan := func(query string, args ...any) error {
		rows, err := conn.QueryContext(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		defer rows.Close()
		raw := make([]any, len(q.By))
		var a reportAgg
		dest := make([]any, 0, len(q.By)+14)
		for i := range raw {
			dest = append(dest, &raw[i])
		}
		dest = append(dest, &a.requests, &a.input, &a.output, &a.total, &a.tokensNull, &a.cost, &a.costNull, &a.errors, &a.inputNull, &a.outputNull,
			&a.cached, &a.cachedNull, &a.reasoning, &a.reasoningNull)
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return fmt.Errorf("report: %w", err)
			}
			vals := make([]string, len(q.By))
			for i, k := range q.By {
				switch v := raw[i].(type) {
				case int64:
					switch k {
					case KeyDay:
						vals[i] = time.UnixMilli(v * dayMS).UTC().Format("2006-01-02")
					case KeyStatus:
						vals[i] = StatusLabel(int(v))
					default:
						vals[i] = strconv.FormatInt(v, 10)
					}
				case string:
					vals[i] = v
				case []byte:
					vals[i] = string(v)
				default:
					return fmt.Errorf("report: key %s: unexpected %T", k, v)
				}
			}
			add(vals, a)
		}
		return rows.Err()
	}
	var rawKeys, hourKeys, groupBy []string
	for i, k := range q.By {
		rawKeys = append(rawKeys, reportCols[k][0]+", ")
		hourKeys = append(hourKeys, reportCols[k][1]+", ")
		groupBy = append(groupBy, strconv.Itoa(i+1))
	}
	group := ""
	if len(groupBy) > 0 {
		group = " GROUP BY " + strings.Join(groupBy, ", ")
	}
	// Errors are settled rows with a status >= 400 or none, or an error
	// code (a cut stream is an error), as the writer
	// counts them in the rollup, so a report does not depend on which rows
	// fall in whole hours.
	rawQ := `SELECT ` + strings.Join(rawKeys, "") + `
  COUNT(*), ` + sqlSum(inputR) + `, ` + sqlSum(outputR) + `, ` + sqlSum(tokensR) + `, COUNT(*) - COUNT(` + tokensR + `),
  ` + sqlSum(costR) + `, COUNT(*) - COUNT(` + costR + `), COALESCE(SUM(state = 1 AND (status >= 400 OR status = 0 OR error_code <> '')),0),
  COUNT(*) - COUNT(` + inputR + `), COUNT(*) - COUNT(` + outputR + `),
  ` + sqlSum(cachedR) + `, COUNT(*) - COUNT(` + cachedR + `), ` + sqlSum(reasoningR) + `, COUNT(*) - COUNT(` + reasoningR + `)
FROM usage WHERE ts_ms >= ? AND ts_ms < ?` + group
	openQ := strings.Replace(rawQ, "WHERE ts_ms >= ? AND ts_ms < ?", "WHERE ts_ms >= ? AND ts_ms < ? AND state = 0", 1)
	hourQ := `SELECT ` + strings.Join(hourKeys, "") + `
  ` + sqlSum("requests") + `, ` + sqlSum("input_tokens") + `, ` + sqlSum("output_tokens") + `, ` + sqlSum("total_tokens") + `, ` + sqlSum("tokens_null") + `,
  ` + sqlSum("cost_micros") + `, ` + sqlSum("cost_null") + `, ` + sqlSum("errors") + `, ` + sqlSum("input_null") + `, ` + sqlSum("output_null") + `,
  ` + sqlSum("cached_input_tokens") + `, ` + sqlSum("cached_null") + `, ` + sqlSum("reasoning_tokens") + `, ` + sqlSum("reasoning_null") + `
FROM usage_hour_dims WHERE bucket >= ? AND bucket < ?` + group
	h1, h2 := CeilTo(f, hourMS), FloorTo(t, hourMS)
	if f < t {
		if h1 >= h2 {
			if err := scan(rawQ, f, t); err != nil {
				return nil, err
			}
		} else {
			for _, r := range [][2]int64{{f, h1}, {h2, t}} {
				if r[0] < r[1] {
					if err := scan(rawQ, r[0], r[1]); err != nil {
						return nil, err
					}
				}
			}
			// The hourly rollup counts the settled rows before the fold
			// frontier; the whole hours' rows from the frontier on are
			// read raw.
			var hourUntil, foldUntil int64
			if err := conn.QueryRowContext(ctx, qHourUntil).Scan(&hourUntil); err != nil {
				return nil, fmt.Errorf("report: %w", err)
			}
			if err := conn.QueryRowContext(ctx, qFoldUntil).Scan(&foldUntil); err != nil {
				return nil, fmt.Errorf("report: %w", err)
			}
			if err := scan(hourQ, h1/hourMS, h2/hourMS); err != nil {
				return nil, err
			}
			if tail := max(foldUntil, h1); tail < h2 {
				if err := scan(rawQ, tail, h2); err != nil {
					return nil, err
				}
			}
			// The unsettled rows before the frontier (requests in
			// flight, or left by a process that died) are read raw from
			// the hours whose totals count more requests than the
			// rollup.
			rolled := min(h2, CeilTo(max(foldUntil, h1), hourMS))
			hours, err := unsettledHours(ctx, conn, h1/hourMS, rolled/hourMS, hourUntil)
			if err != nil {
				return nil, err
			}
			for _, h := range hours {
				if err := scan(openQ, h*hourMS, min((h+1)*hourMS, foldUntil)); err != nil {
					return nil, err
				}
			}
		}
	}
	out := make([]ReportRow, 0, len(groups))
	for key, g := range groups {
		if g.requests == 0 {
			continue
		}
		out = append(out, ReportRow{
			Keys: keyVals[key], Requests: g.requests, InputTokens: g.input, OutputTokens: g.output, TotalTokens: g.total,
			TokensUnknown: g.tokensNull, InputUnknown: g.inputNull, OutputUnknown: g.outputNull, CostMicros: g.cost, CostKnown: g.costNull == 0, Errors: g.errors,
			CachedInputTokens: g.cached, ReasoningTokens: g.reasoning, CachedUnknown: g.cachedNull, ReasoningUnknown: g.reasoningNull, CostUnknown: g.costNull,
		})
	}
	SortReport(out)
	return out, nil
}

// unsettledHours returns the hours in [h1, h2) that hold unsettled rows:
// those whose total requests exceed the settled rows of the report rollup.
// An hour's total comes from usage_hour before hourUntil and from its
// minutes after it (migration 0005).
func unsettledHours(ctx context.Context, conn *sql.Conn, h1, h2, hourUntil int64) ([]int64, error) {
	split := min(max(h1, hourUntil), h2)
	rows, err := conn.QueryContext(ctx, `SELECT h.bucket FROM (
  SELECT bucket, requests FROM usage_hour WHERE bucket >= ? AND bucket < ?
  UNION ALL
  SELECT bucket / 60 AS bucket, TOTAL(requests) AS requests FROM usage_minute WHERE bucket >= ? AND bucket < ? GROUP BY bucket / 60
) h
LEFT JOIN (SELECT bucket, TOTAL(requests) AS requests FROM usage_hour_dims WHERE bucket >= ? AND bucket < ? GROUP BY bucket) d ON d.bucket = h.bucket
WHERE h.requests > COALESCE(d.requests, 0)`, h1, split, split*60, h2*60, h1, h2)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var h int64
		if err := rows.Scan(&h); err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// SetAside returns how many usage rows the fold set aside because their
// usage could not be read (see setAsideRows); each counts as one request
// of unknown usage.
func (s *Store) SetAside(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'set_aside'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("ledger %s: rows set aside: %w", s.path, err)
	}
	return n, nil
}

func validKey(k string) bool {
	for _, v := range ReportKeys {
		if v == k {
			return true
		}
	}
	return false
}

// Rows returns the raw usage rows in [from, to), oldest first, at most
// limit (0 = no limit). For tests and debugging.
func (s *Store) Rows(ctx context.Context, from, to time.Time, limit int) ([]Row, error) {
	q := `WHERE ts_ms >= ? AND ts_ms < ? ORDER BY ts_ms, request_id`
	args := []any{from.UnixMilli(), to.UnixMilli()}
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	return s.queryRows(ctx, q, args...)
}

// queryRows reads usage rows: where is the query's WHERE clause and after.
func (s *Store) queryRows(ctx context.Context, where string, args ...any) ([]Row, error) {
	q := `SELECT request_id, ts_ms, state, expires_ms, operation, pool, model, credential, region, client, attempts, status, error_code,
  ` + inputR + `, ` + outputR + `, ` + tokensR + `, ` + costR + `, COALESCE(latency_ms, 0), ` + cachedR + `, ` + reasoningR + ` FROM usage ` + where
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("rows: %w", err)
	}
	defer rows.Close()
	out, err := ScanRows(rows)
	if err != nil {
		return nil, fmt.Errorf("rows: %w", err)
	}
	return out, nil
}

// SortReport orders a report's rows by their keys, as both engines return
// them.
func SortReport(rows []ReportRow) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i].Keys, rows[j].Keys
		for k := range a {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return false
	})
}
