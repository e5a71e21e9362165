package ledger

// The SQLite ledger's side of pruned.go: reading and writing the rollups
// of pruned usage, next to the other rollup code (doc.go).

import (
	"context"
	"fmt"
	"time"
)

// The SQLite ledger's pruned usage: its rollups before the frontier's
// minute (hour) less the rows there that they count, the rows before the
// fold frontier (usage_minute: every row; usage_hour_dims: settled rows).
var (
	prunedMinutesQ = `SELECT m.bucket, m.requests - COALESCE(r.requests, 0), m.tokens - COALESCE(r.tokens, 0), m.tokens_null - COALESCE(r.tokens_null, 0),
  m.cost_micros - COALESCE(r.cost_micros, 0), m.cost_null - COALESCE(r.cost_null, 0)
FROM usage_minute m LEFT JOIN (
  SELECT ts_ms / 60000 AS bucket, COUNT(*) AS requests, ` + sqlSum(tokensR) + ` AS tokens, COUNT(*) - COUNT(` + tokensR + `) AS tokens_null,
    ` + sqlSum(costR) + ` AS cost_micros, COUNT(*) - COUNT(` + costR + `) AS cost_null
  FROM usage WHERE ts_ms < ?1 AND ts_ms < (` + qFoldUntil + `) GROUP BY 1
) r ON r.bucket = m.bucket
WHERE m.bucket < ?1 / 60000`
	prunedHoursQ = `SELECT h.bucket, h.operation, h.model, h.credential, h.client, h.status,
  h.requests - COALESCE(r.requests, 0), h.input_tokens - COALESCE(r.input_tokens, 0), h.output_tokens - COALESCE(r.output_tokens, 0),
  h.total_tokens - COALESCE(r.total_tokens, 0), h.tokens_null - COALESCE(r.tokens_null, 0), h.cost_micros - COALESCE(r.cost_micros, 0),
  h.cost_null - COALESCE(r.cost_null, 0), h.errors - COALESCE(r.errors, 0), h.input_null - COALESCE(r.input_null, 0),
  h.output_null - COALESCE(r.output_null, 0), h.cached_input_tokens - COALESCE(r.cached_input_tokens, 0), h.cached_null - COALESCE(r.cached_null, 0),
  h.reasoning_tokens - COALESCE(r.reasoning_tokens, 0), h.reasoning_null - COALESCE(r.reasoning_null, 0)
FROM usage_hour_dims h LEFT JOIN (
  SELECT ts_ms / 3600000 AS bucket, operation, model, credential, client, status,
    COUNT(*) AS requests, ` + sqlSum(inputR) + ` AS input_tokens, ` + sqlSum(outputR) + ` AS output_tokens, ` + sqlSum(tokensR) + ` AS total_tokens,
    COUNT(*) - COUNT(` + tokensR + `) AS tokens_null, ` + sqlSum(costR) + ` AS cost_micros, COUNT(*) - COUNT(` + costR + `) AS cost_null,
    SUM(status >= 400 OR status = 0 OR error_code <> '') AS errors, COUNT(*) - COUNT(` + inputR + `) AS input_null,
    COUNT(*) - COUNT(` + outputR + `) AS output_null, ` + sqlSum(cachedR) + ` AS cached_input_tokens, COUNT(*) - COUNT(` + cachedR + `) AS cached_null,
    ` + sqlSum(reasoningR) + ` AS reasoning_tokens, COUNT(*) - COUNT(` + reasoningR + `) AS reasoning_null
  FROM usage WHERE ts_ms < ?1 AND ts_ms < (` + qFoldUntil + `) AND state = 1 GROUP BY 1, 2, 3, 4, 5, 6
) r ON r.bucket = h.bucket AND r.operation = h.operation AND r.model = h.model AND r.credential = h.credential AND r.client = h.client AND r.status = h.status
WHERE h.bucket < ?1 / 3600000`
)

// PrunedUsage returns the usage before the prune frontier that only the
// rollups count (see the top of pruned.go); empty when never pruned.
func (s *Store) PrunedUsage(ctx context.Context) (PrunedUsage, error) {
	// One read transaction: the rollups and the rows of one state.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return PrunedUsage{}, fmt.Errorf("pruned usage: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN DEFERRED"); err != nil {
		return PrunedUsage{}, fmt.Errorf("pruned usage: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	p, err := prunedUsage(ctx, conn)
	if err != nil {
		return PrunedUsage{}, fmt.Errorf("pruned usage: %w", err)
	}
	return p, nil
}

func prunedUsage(ctx context.Context, q querier) (PrunedUsage, error) {
	var p PrunedUsage
	var until int64
	if err := q.QueryRowContext(ctx, qPrunedUntil).Scan(&until); err != nil || until == 0 {
		return p, err
	}
	p.Until = time.UnixMilli(until).UTC()
	mEnd, hEnd := p.Bounds()
	rows, err := q.QueryContext(ctx, prunedMinutesQ, mEnd)
	if err != nil {
		return p, err
	}
	p.Minutes, err = ScanPrunedMinutes(rows)
	rows.Close()
	if err != nil {
		return p, err
	}
	rows, err = q.QueryContext(ctx, prunedHoursQ, hEnd)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	if p.Hours, err = ScanPrunedHours(rows); err != nil {
		return p, err
	}
	SortPruned(&p)
	return p, nil
}

// qUsageBefore finds usage before a cut: a row before ?1 (the cut's hour
// end) or a rollup bucket before ?2 (the cut).
const qUsageBefore = `SELECT EXISTS (SELECT 1 FROM usage WHERE ts_ms < ?1)
  OR EXISTS (SELECT 1 FROM usage_minute WHERE bucket < ?2 / 60000)
  OR EXISTS (SELECT 1 FROM usage_hour WHERE bucket < ?2 / 3600000)
  OR EXISTS (SELECT 1 FROM usage_hour_dims WHERE bucket < ?2 / 3600000)`

// ImportPruned carries p, another ledger's pruned usage, into this one's
// rollups in one transaction and moves the prune frontier to p.Until
// (never back), so that every read over that time reads p. It returns the
// requests it added: 0 when this ledger's own pruned usage already is p
// (a second copy). It refuses, with ErrPrunedOverlap and nothing written,
// a ledger holding any other usage before p.Until (or a row in its hour).
func (s *Store) ImportPruned(ctx context.Context, p PrunedUsage) (int64, error) {
	if p.Until.IsZero() || p.Empty() {
		return 0, nil
	}
	var added int64
	err := s.exec(ctx, func(ctx context.Context, q execQuerier) error {
		added = 0
		own, err := prunedUsage(ctx, q)
		if err != nil {
			return err
		}
		if own.Equal(p) {
			return nil
		}
		cut := p.Until.UnixMilli()
		_, hEnd := p.Bounds()
		var overlap bool
		if err := q.QueryRowContext(ctx, qUsageBefore, hEnd, cut).Scan(&overlap); err != nil {
			return err
		}
		if overlap {
			return refuse(fmt.Errorf("%w %s", ErrPrunedOverlap, p.Until.Format(time.RFC3339)))
		}
		for _, m := range p.Minutes {
			if _, err := q.ExecContext(ctx, upsertMinute, m.Minute, m.Totals.Requests, m.Tokens, m.TokensUnknown, m.CostMicros, m.CostUnknown); err != nil {
				return err
			}
		}
		for _, h := range p.Hours {
			args := []any{h.Hour, h.Operation, h.Model, h.Credential, h.Client, h.Status}
			for _, c := range h.Cols() {
				args = append(args, *c)
			}
			if _, err := q.ExecContext(ctx, upsertDims, args...); err != nil {
				return err
			}
		}
		// No row lies before the cut's hour end: the fold frontier moves
		// there (the rollups count everything before it), and the hour
		// frontier too, with the hours behind it written from their
		// minutes, as rollHours would.
		foldUntil, hourUntil, err := frontiers(ctx, q)
		if err != nil {
			return err
		}
		foldUntil, hourUntil = max(foldUntil, hEnd), max(hourUntil, hEnd/hourMS)
		first := hEnd / minuteMS
		if len(p.Minutes) > 0 {
			first = p.Minutes[0].Minute
		}
		if len(p.Hours) > 0 {
			first = min(first, p.Hours[0].Hour*60)
		}
		if _, err := q.ExecContext(ctx, rollHourRows, FloorTo(first, 60), hourUntil*60); err != nil {
			return err
		}
		for _, st := range []struct {
			sql string
			v   int64
		}{
			{setFoldUntil, foldUntil},
			{`UPDATE meta SET value = ? WHERE key = 'hour_rollup_until'`, hourUntil},
			{`INSERT INTO meta (key, value) VALUES ('pruned_until', ?) ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)`, cut},
		} {
			if _, err := q.ExecContext(ctx, st.sql, st.v); err != nil {
				return err
			}
		}
		// Runs in the writer, which keeps the frontiers and cached windows.
		w := s.w
		w.windows.reset()
		w.foldUntil, w.hourUntil, w.prunedUntil = foldUntil, hourUntil, max(w.prunedUntil, cut)
		added = p.Requests()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("import pruned usage: %w", err)
	}
	return added, nil
}

// frontiers reads the fold frontier (unix ms) and the hour frontier (unix
// hours).
func frontiers(ctx context.Context, q querier) (foldUntil, hourUntil int64, err error) {
	if err := q.QueryRowContext(ctx, qFoldUntil).Scan(&foldUntil); err != nil {
		return 0, 0, err
	}
	err = q.QueryRowContext(ctx, qHourUntil).Scan(&hourUntil)
	return foldUntil, hourUntil, err
}
