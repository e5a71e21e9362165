package pgledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rotorhq/rotor/ledger"
)

// Resolve records an operator's tokens on the row of res's request id
// (`rotor ledger settle`), as the SQLite ledger does: a reservation is
// settled; a settled row of unknown usage gets the tokens and the cost at
// the price in force now; a row whose usage is known is refused with
// ledger.ErrUsageKnown; no row, ledger.ErrNotFound.
func (s *Store) Resolve(ctx context.Context, res ledger.Resolution) error {
	if err := res.Validate(); err != nil {
		return err
	}
	return s.w.submitWait(nil, ctx, &op{kind: opResolve, resolve: res})
}

func (b *batch) resolveRow(i int, res ledger.Resolution) error {
	if err := b.flushRows(); err != nil {
		return &dbError{err}
	}
	var ts, expires int64
	var state int16
	var old ledger.Settlement
	var in, out, tot, cost, cached, reasoning *int64
	var opName, client string
	err := b.conn.QueryRow(b.ctx, `SELECT ts_ms, expires_ms, state, operation, model, credential, client, status, error_code, attempts,
  `+inputR+`, `+outputR+`, `+tokensR+`, `+costR+`, `+cachedR+`, `+reasoningR+` FROM usage WHERE request_id = $1 FOR UPDATE`, res.RequestID).
		Scan(&ts, &expires, &state, &opName, &old.Model, &old.Credential, &client, &old.Status, &old.ErrorCode, &old.Attempts,
			&in, &out, &tot, &cost, &cached, &reasoning)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("ledger settle %s: no such request: %w", res.RequestID, ledger.ErrNotFound)
	}
	if err != nil {
		return &dbError{err}
	}
	old.RequestID = res.RequestID
	old.InputTokens, old.OutputTokens, old.TotalTokens, old.CostMicros = ledger.CountOf(in), ledger.CountOf(out), ledger.CountOf(tot), ledger.CountOf(cost)
	old.CachedInputTokens, old.ReasoningTokens = ledger.CountOf(cached), ledger.CountOf(reasoning)
	st := old
	st.InputTokens, st.OutputTokens, st.CachedInputTokens = res.Input, res.Output, res.CachedInput
	st.TotalTokens = ledger.Known(ledger.SatAdd(res.Input.V, res.Output.V))
	st.CostMicros = ledger.Count{}
	if state == 0 {
		// Settled once its request can no longer be running.
		if err := ledger.CheckNotInFlight(res.RequestID, ts, expires, b.now); err != nil {
			return err
		}
		return b.settleRow(i, st)
	}
	if old.TotalTokens.Known && (old.CostMicros.Known || opName == ledger.OperationDecisions) {
		return fmt.Errorf("ledger settle %s: %w (%d tokens)", res.RequestID, ledger.ErrUsageKnown, old.TotalTokens.V)
	}
	r := openRow{ts: ts, dim: dims{operation: opName, model: old.Model, credential: old.Credential, client: client, status: old.Status}}
	b.price(&st, r, false)
	od, nd := rowDelta(old), rowDelta(st)
	b.pending = append(b.pending, pendingStmt{
		sql:  `UPDATE usage SET input_tokens = $1, output_tokens = $2, total_tokens = $3, cached_input_tokens = $4, cost_micros = $5 WHERE request_id = $6`,
		args: []any{arg(st.InputTokens), arg(st.OutputTokens), arg(st.TotalTokens), arg(st.CachedInputTokens), arg(st.CostMicros), res.RequestID},
	})
	b.addRow(ts, r.dim, od.neg())
	b.addRow(ts, r.dim, nd)
	return nil
}
