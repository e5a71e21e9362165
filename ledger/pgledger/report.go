package pgledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rotorhq/rotor/ledger"
)

// reportCols are the group keys' SQL over raw rows and over the report
// rollup.
var reportCols = map[string][2]string{
	ledger.KeyOperation:  {"operation", "operation"},
	ledger.KeyModel:      {"model", "model"},
	ledger.KeyDay:        {"ts_ms / 86400000", "bucket / 24"},
	ledger.KeyCredential: {"credential", "credential"},
	ledger.KeyClient:     {"client", "client"},
	ledger.KeyStatus:     {"status", "status"},
}

type reportAgg [14]int64 // requests, input, output, total, tokensNull, cost, costNull, errors, inputNull, outputNull, cached, cachedNull, reasoning, reasoningNull

// Report aggregates usage in [From, To) by the query's keys: whole hours
// from the report rollup (usage_hour_dims, which counts open reservations
// too, in status 0), the partial hours at the edges from raw rows. Its
// cost does not grow with the number of rows.
func (s *Store) Report(ctx context.Context, q ledger.ReportQuery) ([]ledger.ReportRow, error) {
	for _, k := range q.By {
		if _, ok := reportCols[k]; !ok {
			return nil, fmt.Errorf("report: unknown group key %q (want %s)", k, strings.Join(ledger.ReportKeys, ", "))
		}
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := readCtx(ctx)
	defer cancel()
	f, t := q.From.UnixMilli(), q.To.UnixMilli()
	groups := map[string]*reportAgg{}
	keyVals := map[string][]string{}
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
	nulls := func(e string) string { return "COUNT(*) - COUNT(" + e + ")" }
	rawQ := `SELECT ` + strings.Join(rawKeys, "") + `COUNT(*), ` + sumSat(inputR) + `, ` + sumSat(outputR) + `, ` + sumSat(tokensR) + `, ` + nulls(tokensR) + `,
  ` + sumSat(costR) + `, ` + nulls(costR) + `, COUNT(*) FILTER (WHERE state = 1 AND (status >= 400 OR status = 0 OR error_code <> '')),
  ` + nulls(inputR) + `, ` + nulls(outputR) + `, ` + sumSat(cachedR) + `, ` + nulls(cachedR) + `, ` + sumSat(reasoningR) + `, ` + nulls(reasoningR) + `
FROM usage WHERE ts_ms >= $1 AND ts_ms < $2` + group
	var sums []string
	for _, c := range dimCols {
		sums = append(sums, sumSat(c))
	}
	hourQ := `SELECT ` + strings.Join(hourKeys, "") + strings.Join(sums, ", ") + ` FROM usage_hour_dims WHERE bucket >= $1 AND bucket < $2` + group

	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, s.wrap("report", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// Pruned time has its rollups only (prune.go): a range that starts or
	// ends there counts whole hours.
	var prunedUntil int64
	if err := tx.QueryRow(ctx, `SELECT `+qPrunedUntil).Scan(&prunedUntil); err != nil {
		return nil, s.wrap("report", err)
	}
	p := ledger.CeilTo(prunedUntil, hourMS)
	if f < p {
		f = ledger.FloorTo(f, hourMS)
	}
	if t < p {
		t = ledger.CeilTo(t, hourMS)
	}
	scan := func(query string, lo, hi int64) error {
		if lo >= hi {
			return nil
		}
		rows, err := tx.Query(ctx, query, lo, hi)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			vs, err := rows.Values()
			if err != nil {
				return err
			}
			vals := make([]string, len(q.By))
			for i, k := range q.By {
				var n int64
				switch v := vs[i].(type) {
				case string:
					vals[i] = v
					continue
				case int64:
					n = v
				case int32:
					n = int64(v)
				default:
					return fmt.Errorf("key %s: unexpected %T", k, v)
				}
				switch k {
				case ledger.KeyDay:
					vals[i] = time.UnixMilli(n * dayMS).UTC().Format("2006-01-02")
				case ledger.KeyStatus:
					vals[i] = ledger.StatusLabel(int(n))
				default:
					vals[i] = strconv.FormatInt(n, 10)
				}
			}
			key := strings.Join(vals, "\x00")
			g, ok := groups[key]
			if !ok {
				g = &reportAgg{}
				groups[key] = g
				keyVals[key] = vals
			}
			for j := range g {
				x, ok := vs[len(q.By)+j].(int64)
				if !ok {
					return fmt.Errorf("column %d: unexpected %T", j, vs[len(q.By)+j])
				}
				g[j] = ledger.SatAdd(g[j], x)
			}
		}
		return rows.Err()
	}
	h1, h2 := ledger.CeilTo(f, hourMS), ledger.FloorTo(t, hourMS)
	if f < t {
		if h1 >= h2 {
			err = scan(rawQ, f, t)
		} else {
			err = errors.Join(scan(rawQ, f, h1), scan(hourQ, h1/hourMS, h2/hourMS), scan(rawQ, h2, t))
		}
		if err != nil {
			return nil, s.wrap("report", err)
		}
	}
	out := make([]ledger.ReportRow, 0, len(groups))
	for key, g := range groups {
		if g[0] == 0 {
			continue
		}
		out = append(out, ledger.ReportRow{
			Keys: keyVals[key], Requests: g[0], InputTokens: g[1], OutputTokens: g[2], TotalTokens: g[3],
			TokensUnknown: g[4], CostMicros: g[5], CostKnown: g[6] == 0, CostUnknown: g[6], Errors: g[7],
			InputUnknown: g[8], OutputUnknown: g[9], CachedInputTokens: g[10], CachedUnknown: g[11], ReasoningTokens: g[12], ReasoningUnknown: g[13],
		})
	}
	ledger.SortReport(out)
	return out, nil
}

// SetAside is 0: this engine never sets rows aside (unreadable values are
// read as unknown where they are summed).
func (s *Store) SetAside(ctx context.Context) (int64, error) {
	return 0, s.checkOpen()
}

const selectRows = `SELECT request_id, ts_ms, state, expires_ms, operation, pool, model, credential, region, client, attempts, status, error_code,
  ` + "%s" + ` FROM usage`

var rowCols = inputR + `, ` + outputR + `, ` + tokensR + `, ` + costR + `, COALESCE(latency_ms, 0), ` + cachedR + `, ` + reasoningR

// Rows returns the raw usage rows in [from, to), oldest first, at most
// limit (0 = no limit).
func (s *Store) Rows(ctx context.Context, from, to time.Time, limit int) ([]ledger.Row, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := readCtx(ctx)
	defer cancel()
	q := fmt.Sprintf(selectRows, rowCols) + ` WHERE ts_ms >= $1 AND ts_ms < $2 ORDER BY ts_ms, request_id`
	args := []any{from.UnixMilli(), to.UnixMilli()}
	if limit > 0 {
		q += " LIMIT $3"
		args = append(args, limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.wrap("rows", err)
	}
	defer rows.Close()
	out, err := ledger.ScanRows(rows)
	if err != nil {
		return nil, s.wrap("rows", err)
	}
	return out, nil
}

// rowDeltaOf is an imported row's contribution to the rollups, as its
// values read.
func rowDeltaOf(r ledger.Row) (dims, delta) {
	st := ledger.Settlement{Status: r.Status, ErrorCode: r.ErrorCode, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, TotalTokens: r.TotalTokens,
		CachedInputTokens: r.CachedInputTokens, ReasoningTokens: r.ReasoningTokens, CostMicros: r.CostMicros}
	st.ForgetUnreadable()
	d := rowDelta(st)
	if !r.Settled {
		d.errors = 0
	}
	return dims{operation: r.Operation, model: r.Model, credential: r.Credential, client: r.Client, status: r.Status}, d
}

// ImportRows writes the rows whose request id is not stored yet, as they
// are, counting them in the rollups, under the admission lock.
func (s *Store) ImportRows(ctx context.Context, rows []ledger.Row) (int, error) {
	if len(rows) == 0 {
		return 0, s.checkOpen()
	}
	added := 0
	err := s.change(ctx, "import rows", false, func(ctx context.Context, tx pgx.Tx) error {
		added = 0
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.lockKey); err != nil {
			return err
		}
		pb := &pgx.Batch{}
		for _, r := range rows {
			state := 0
			if r.Settled {
				state = 1
			}
			pb.Queue(`INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, pool, model, credential, region, client, attempts, status, error_code,
  input_tokens, output_tokens, total_tokens, cost_micros, latency_ms, cached_input_tokens, reasoning_tokens)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20) ON CONFLICT (request_id) DO NOTHING`,
				r.RequestID, r.Time.UnixMilli(), state, r.Expires.UnixMilli(), r.Operation, r.Pool, r.Model, r.Credential, r.Region, r.Client,
				r.Attempts, r.Status, r.ErrorCode, arg(r.InputTokens), arg(r.OutputTokens), arg(r.TotalTokens), arg(r.CostMicros),
				r.Latency.Milliseconds(), arg(r.CachedInputTokens), arg(r.ReasoningTokens))
		}
		br := tx.SendBatch(ctx, pb)
		tags := make([]pgconn.CommandTag, len(rows))
		var err error
		for i := range rows {
			if tags[i], err = br.Exec(); err != nil {
				break
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		b := &batch{minute: map[int64]ledger.Totals{}, hour: map[int64]ledger.Totals{}, day: map[int64]ledger.Totals{}, dims: map[dimKey]delta{}, view: &view{}}
		for i, r := range rows {
			if tags[i].RowsAffected() == 1 {
				added++
				d, x := rowDeltaOf(r)
				b.addRow(r.Time.UnixMilli(), d, x)
			}
		}
		pb = &pgx.Batch{}
		b.queueRollups(pb)
		pb.Queue(bumpUsageVersion)
		return tx.SendBatch(ctx, pb).Close()
	})
	return added, err
}
