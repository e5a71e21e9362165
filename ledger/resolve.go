package ledger

// `rotor ledger settle`: an operator resolves a row of unknown usage (a
// reservation left by a crash, a cut stream with no usage seen) with the
// tokens the provider's own records give, so that one broken request need
// not keep a cost budget failing closed for its whole window.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrUsageKnown refuses to resolve a row whose usage is already known.
var ErrUsageKnown = errors.New("usage already known")

// ErrInFlight refuses to resolve a reservation whose request may still be
// running: within its deadline plus grace (and younger than MaxInFlight),
// as InFlight counts them. Its own settlement would then fail, and a
// stream or answer with it.
var ErrInFlight = errors.New("request in flight")

// InFlightError is ErrInFlight with the time the reservation stops
// counting as in flight.
type InFlightError struct {
	RequestID string
	Until     time.Time
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("ledger settle %s: %v until %s", e.RequestID, ErrInFlight, e.Until.UTC().Format(time.RFC3339))
}

func (e *InFlightError) Unwrap() error { return ErrInFlight }

// CheckNotInFlight returns an *InFlightError when a reservation made at ts
// expiring at expires (ms) is still in flight at now.
func CheckNotInFlight(requestID string, ts, expires, now int64) error {
	if expires > now && ts >= now-MaxInFlight.Milliseconds() {
		return &InFlightError{RequestID: requestID, Until: time.UnixMilli(min(expires, ts+MaxInFlight.Milliseconds()))}
	}
	return nil
}

// Resolution is the usage an operator gives a row of unknown usage.
type Resolution struct {
	RequestID                  string
	Input, Output, CachedInput Count
}

// Resolve records res's tokens on the row of its request id, settling it
// when it was still a reservation, and its cost from the price in force
// now (Decisions rows keep unknown cost). A row whose tokens and cost are
// both known is refused with ErrUsageKnown; no row, ErrNotFound.
func (s *Store) Resolve(ctx context.Context, res Resolution) error {
	if err := res.Validate(); err != nil {
		return err
	}
	return s.w.submit(nil, &op{kind: opResolve, resolve: res})
}

// Validate refuses a resolution that no engine may record: input or
// output missing, cached input above input, or a count, or the total of
// input and output, outside 0..MaxUsage. A total above MaxUsage would be
// stored unreadable (unknown), and SQLite's next fold would set the row
// aside, losing the operator's resolution.
func (res Resolution) Validate() error {
	if !res.Input.Known || !res.Output.Known {
		return errors.New("ledger settle: input and output tokens are required")
	}
	if res.CachedInput.Known && res.CachedInput.V > res.Input.V {
		return fmt.Errorf("ledger settle: cached input %d is more than input %d", res.CachedInput.V, res.Input.V)
	}
	for _, c := range []Count{res.Input, res.Output, res.CachedInput} {
		if c.Known && !Readable(c.V) {
			return fmt.Errorf("ledger settle: %d tokens is outside 0..%d", c.V, int64(MaxUsage))
		}
	}
	if res.Input.V+res.Output.V > MaxUsage { // each at most MaxUsage: no overflow
		return fmt.Errorf("ledger settle: input %d + output %d tokens is more than %d", res.Input.V, res.Output.V, int64(MaxUsage))
	}
	return nil
}

func (b *batch) resolve(res Resolution) error {
	var ts, expires int64
	var state int
	var old Settlement
	var in, out, tot, cost, cached, reasoning *int64
	var op, client string
	err := b.q.QueryRowContext(b.ctx, `SELECT ts_ms, expires_ms, state, operation, model, credential, client, status, error_code, attempts,
  `+inputR+`, `+outputR+`, `+tokensR+`, `+costR+`, `+cachedR+`, `+reasoningR+` FROM usage WHERE request_id = ?`, res.RequestID).
		Scan(&ts, &expires, &state, &op, &old.Model, &old.Credential, &client, &old.Status, &old.ErrorCode, &old.Attempts,
			&in, &out, &tot, &cost, &cached, &reasoning)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("ledger settle %s: no such request: %w", res.RequestID, ErrNotFound)
	}
	if err != nil {
		return &dbError{err}
	}
	old.RequestID = res.RequestID
	old.InputTokens, old.OutputTokens, old.TotalTokens, old.CostMicros = CountOf(in), CountOf(out), CountOf(tot), CountOf(cost)
	old.CachedInputTokens, old.ReasoningTokens = CountOf(cached), CountOf(reasoning)
	st := old
	st.InputTokens, st.OutputTokens, st.CachedInputTokens = res.Input, res.Output, res.CachedInput
	st.TotalTokens = Known(SatAdd(res.Input.V, res.Output.V))
	if state == 0 {
		// Still a reservation: settle it, as its request would have, once
		// that request can no longer be running.
		if err := CheckNotInFlight(res.RequestID, ts, expires, b.view.now.UnixMilli()); err != nil {
			return err
		}
		st.CostMicros = Count{}
		return b.settleRow(st)
	}
	if old.TotalTokens.Known && (old.CostMicros.Known || op == OperationDecisions) {
		return fmt.Errorf("ledger settle %s: %w (%d tokens)", res.RequestID, ErrUsageKnown, old.TotalTokens.V)
	}
	r := openRow{ts: ts, dim: dims{operation: op, model: old.Model, credential: old.Credential, client: client, status: old.Status}}
	st.CostMicros = Count{}
	if err := b.price(&st, r); err != nil {
		return err
	}
	if _, err := b.q.ExecContext(b.ctx, `UPDATE usage SET input_tokens = ?, output_tokens = ?, total_tokens = ?, cached_input_tokens = ?, cost_micros = ?
WHERE ts_ms = ? AND request_id = ?`, st.InputTokens.arg(), st.OutputTokens.arg(), st.TotalTokens.arg(), st.CachedInputTokens.arg(), st.CostMicros.arg(),
		ts, res.RequestID); err != nil {
		return &dbError{err}
	}
	// The rollups trade the row as it was for the row as it is now.
	od, nd := settlementDelta(old), settlementDelta(st)
	t := nd.Totals
	t.Add(od.Totals.Neg())
	b.addTotals(ts, t)
	b.addDims(ts, r.dim, od.neg())
	b.addDims(ts, r.dim, nd)
	return nil
}

// neg is the delta that undoes d.
func (d delta) neg() delta {
	return delta{Totals: d.Totals.Neg(), input: -d.input, output: -d.output, inputUnknown: -d.inputUnknown, outputUnknown: -d.outputUnknown,
		cached: -d.cached, reasoning: -d.reasoning, cachedUnknown: -d.cachedUnknown, reasoningUnknown: -d.reasoningUnknown, errors: -d.errors}
}
