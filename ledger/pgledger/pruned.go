package pgledger

// The pruned usage `rotor ledger copy` carries (ledger/pruned.go): the
// rollups before the prune frontier's minute (hour) less the rows still
// stored there, which the rollups here count all, open or settled.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotorhq/rotor/ledger"
)

var (
	prunedMinutesQ = `SELECT m.bucket, m.requests - COALESCE(r.requests, 0), m.tokens - COALESCE(r.tokens, 0), m.tokens_null - COALESCE(r.tokens_null, 0),
  m.cost_micros - COALESCE(r.cost_micros, 0), m.cost_null - COALESCE(r.cost_null, 0)
FROM usage_minute m LEFT JOIN (
  SELECT ts_ms / 60000 AS bucket, COUNT(*)::bigint AS requests, ` + sumSat(tokensR) + ` AS tokens, COUNT(*) - COUNT(` + tokensR + `) AS tokens_null,
    ` + sumSat(costR) + ` AS cost_micros, COUNT(*) - COUNT(` + costR + `) AS cost_null
  FROM usage WHERE ts_ms < $1 GROUP BY 1
) r ON r.bucket = m.bucket
WHERE m.bucket < $1::bigint / 60000`
	prunedHoursQ = func() string {
		var cols, rowCols []string
		for _, c := range dimCols {
			cols = append(cols, "h."+c+" - COALESCE(r."+c+", 0)")
		}
		nulls := func(e string) string { return "COUNT(*) - COUNT(" + e + ")" }
		for i, e := range []string{"COUNT(*)::bigint", sumSat(inputR), sumSat(outputR), sumSat(tokensR), nulls(tokensR), sumSat(costR), nulls(costR),
			"COUNT(*) FILTER (WHERE state = 1 AND (status >= 400 OR status = 0 OR error_code <> ''))",
			nulls(inputR), nulls(outputR), sumSat(cachedR), nulls(cachedR), sumSat(reasoningR), nulls(reasoningR)} {
			rowCols = append(rowCols, e+" AS "+dimCols[i])
		}
		return `SELECT h.bucket, h.operation, h.model, h.credential, h.client, h.status, ` + strings.Join(cols, ", ") + `
FROM usage_hour_dims h LEFT JOIN (
  SELECT ts_ms / 3600000 AS bucket, operation, model, credential, client, status, ` + strings.Join(rowCols, ", ") + `
  FROM usage WHERE ts_ms < $1 GROUP BY 1, 2, 3, 4, 5, 6
) r ON r.bucket = h.bucket AND r.operation = h.operation AND r.model = h.model AND r.credential = h.credential AND r.client = h.client AND r.status = h.status
WHERE h.bucket < $1::bigint / 3600000`
	}()
	// qUsageBefore finds usage before a cut: a row before $1 (the cut's
	// hour end) or a rollup bucket before $2 (the cut).
	qUsageBefore = `SELECT EXISTS (SELECT 1 FROM usage WHERE ts_ms < $1::bigint)
  OR EXISTS (SELECT 1 FROM usage_minute WHERE bucket < $2::bigint / 60000)
  OR EXISTS (SELECT 1 FROM usage_hour_dims WHERE bucket < $2::bigint / 3600000)`
)

// PrunedUsage returns the usage before the prune frontier that only the
// rollups count; empty when never pruned.
func (s *Store) PrunedUsage(ctx context.Context) (ledger.PrunedUsage, error) {
	if err := s.checkOpen(); err != nil {
		return ledger.PrunedUsage{}, err
	}
	ctx, cancel := readCtx(ctx)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return ledger.PrunedUsage{}, s.wrap("pruned usage", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	p, err := prunedUsage(ctx, tx)
	if err != nil {
		return ledger.PrunedUsage{}, s.wrap("pruned usage", err)
	}
	return p, nil
}

func prunedUsage(ctx context.Context, tx pgx.Tx) (ledger.PrunedUsage, error) {
	var p ledger.PrunedUsage
	var until int64
	if err := tx.QueryRow(ctx, `SELECT `+qPrunedUntil).Scan(&until); err != nil || until == 0 {
		return p, err
	}
	p.Until = time.UnixMilli(until).UTC()
	mEnd, hEnd := p.Bounds()
	rows, err := tx.Query(ctx, prunedMinutesQ, mEnd)
	if err != nil {
		return p, err
	}
	p.Minutes, err = ledger.ScanPrunedMinutes(rows)
	rows.Close()
	if err != nil {
		return p, err
	}
	rows, err = tx.Query(ctx, prunedHoursQ, hEnd)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	if p.Hours, err = ledger.ScanPrunedHours(rows); err != nil {
		return p, err
	}
	ledger.SortPruned(&p)
	return p, nil
}

// ImportPruned carries p, another ledger's pruned usage, into the rollups
// and moves the prune frontier to p.Until (never back), in one
// transaction under the admission lock; see ledger.Importer. It bumps the
// usage version, so that every process reads its windows afresh.
func (s *Store) ImportPruned(ctx context.Context, p ledger.PrunedUsage) (int64, error) {
	if p.Until.IsZero() || p.Empty() {
		return 0, s.checkOpen()
	}
	var added int64
	err := s.change(ctx, "import pruned usage", false, func(ctx context.Context, tx pgx.Tx) error {
		added = 0
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.lockKey); err != nil {
			return err
		}
		own, err := prunedUsage(ctx, tx)
		if err != nil {
			return err
		}
		if own.Equal(p) {
			return nil
		}
		cut := p.Until.UnixMilli()
		_, hEnd := p.Bounds()
		var overlap bool
		if err := tx.QueryRow(ctx, qUsageBefore, hEnd, cut).Scan(&overlap); err != nil {
			return err
		}
		if overlap {
			return &refusal{fmt.Errorf("%w %s", ledger.ErrPrunedOverlap, p.Until.Format(time.RFC3339))}
		}
		pb := &pgx.Batch{}
		hours, days := map[int64]ledger.Totals{}, map[int64]ledger.Totals{}
		for _, m := range p.Minutes {
			pb.Queue(upsertMinute, m.Minute, m.Totals.Requests, m.Tokens, m.TokensUnknown, m.CostMicros, m.CostUnknown)
			h, d := ledger.FloorTo(m.Minute, 60)/60, ledger.FloorTo(m.Minute, 24*60)/(24*60)
			x := hours[h]
			x.Add(m.Totals)
			hours[h] = x
			x = days[d]
			x.Add(m.Totals)
			days[d] = x
		}
		for k, t := range hours {
			pb.Queue(upsertHour, k, t.Requests, t.Tokens, t.TokensUnknown, t.CostMicros, t.CostUnknown)
		}
		for k, t := range days {
			pb.Queue(upsertDay, k, t.Requests, t.Tokens, t.TokensUnknown, t.CostMicros, t.CostUnknown)
		}
		for _, h := range p.Hours {
			args := []any{h.Hour, h.Operation, h.Model, h.Credential, h.Client, h.Status}
			for _, c := range h.Cols() {
				args = append(args, *c)
			}
			pb.Queue(upsertDims, args...)
		}
		pb.Queue(`INSERT INTO meta (key, value) VALUES ('pruned_until', $1)
ON CONFLICT (key) DO UPDATE SET value = GREATEST(meta.value, excluded.value)`, cut)
		pb.Queue(bumpUsageVersion)
		if err := tx.SendBatch(ctx, pb).Close(); err != nil {
			return err
		}
		added = p.Requests()
		return nil
	})
	return added, err
}
