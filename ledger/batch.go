package ledger

// A batch's writes: each op applied inside the writer's transaction
// (writer.go runs the batches), and the Store methods that queue them.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

func (b *batch) apply(o *op) (err error) {
	defer func() {
		// An admitter's bug must not take the writer (and every request
		// waiting on it) down with it.
		if p := recover(); p != nil {
			err = &dbError{fmt.Errorf("ledger: write panicked: %v", p)}
		}
	}()
	switch o.kind {
	case opReserve:
		return b.reserve(o)
	case opSettle:
		return b.settleRow(o.settle)
	case opRelease:
		return b.release(o.id)
	case opTouch:
		return b.touch(o.touch)
	case opResolve:
		return b.resolve(o.resolve)
	case opFunc:
		if err := o.fn(b.ctx, b.q); err != nil {
			var r *refusal
			if errors.As(err, &r) {
				// Refused before it wrote anything.
				return r.err
			}
			return &dbError{err}
		}
		// A change made by fn (budgets, tokens) must be seen by the next
		// batch's admission in this process too.
		if o.bumpsConfig {
			b.w.cfgVer = -1
		}
		return nil
	}
	return fmt.Errorf("ledger: unknown op %d", o.kind)
}

func (b *batch) reserve(o *op) error {
	r := o.res
	if r.RequestID == "" {
		return errors.New("ledger: reservation without request id")
	}
	if _, dup := b.w.open[r.RequestID]; dup {
		return fmt.Errorf("ledger: request %s: %w", r.RequestID, ErrExists)
	}
	if _, dup := b.opened[r.RequestID]; dup {
		return fmt.Errorf("ledger: request %s: %w", r.RequestID, ErrExists)
	}
	if r.CheckToken {
		if _, ok := b.w.tokens[r.Token]; !ok {
			return ErrTokenRevoked
		}
	}
	var price *Price
	if r.Operation != OperationDecisions {
		if p, ok := b.w.prices[r.Model]; ok {
			price, r.Priced = &p, true
		}
	}
	if o.admit != nil {
		if err := o.admit.Admit(b.view, r); err != nil {
			return err
		}
	}
	ts := b.view.now.UnixMilli()
	_, err := b.q.ExecContext(b.ctx, `INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, pool, model, region, client) VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?)`,
		r.RequestID, ts, r.Expires.UnixMilli(), r.Operation, r.Pool, r.Model, r.Region, r.Client)
	if err != nil {
		if isConstraint(err) {
			return fmt.Errorf("ledger: request %s: %w", r.RequestID, ErrExists)
		}
		return &dbError{err}
	}
	d := dims{operation: r.Operation, model: r.Model, client: r.Client}
	b.addTotals(ts, reservationDelta().Totals)
	b.w.unfolded++
	b.opened[r.RequestID] = openRow{ts: ts, expires: r.Expires.UnixMilli(), dim: d, price: price, reserved: true}
	return nil
}

// inFlight counts this process's open reservations in [f, t) whose
// expiry is after now, those of this batch included.
func (b *batch) inFlight(f, t, now int64) int64 {
	n := int64(0)
	for _, m := range []map[string]openRow{b.w.open, b.opened} {
		for _, r := range m {
			if r.ts >= f && r.ts < t && r.expires > now {
				n++
			}
		}
	}
	// Settled or released by this batch, still in w.open until it commits.
	for _, id := range b.closed {
		if r, ok := b.w.open[id]; ok && r.ts >= f && r.ts < t && r.expires > now {
			n--
		}
	}
	return n
}

func (b *batch) lookupOpen(id string) (openRow, bool, error) {
	if r, ok := b.opened[id]; ok {
		return r, true, nil
	}
	if r, ok := b.w.open[id]; ok {
		// Settled or released earlier in this batch: w.open keeps it
		// until the commit, but it is no longer open.
		if slices.Contains(b.closed, id) {
			return openRow{}, false, nil
		}
		return r, true, nil
	}
	// Not written by this process: read it. Without an index on
	// request_id this scans, but a process only ever settles its own
	// reservations, which it remembers.
	var r openRow
	err := b.q.QueryRowContext(b.ctx, `SELECT ts_ms, operation, model, credential, client, status FROM usage WHERE request_id = ? AND state = 0`, id).
		Scan(&r.ts, &r.dim.operation, &r.dim.model, &r.dim.credential, &r.dim.client, &r.dim.status)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, &dbError{err}
	}
	return r, true, nil
}

func (b *batch) settleRow(s Settlement) error {
	if s.ForgetUnreadable() && !b.w.s.warnedUsage.Swap(true) {
		b.w.s.log.Warn("ledger: provider usage outside 0..10^12 recorded as unknown (logged once)", "request_id", s.RequestID)
	}
	r, ok, err := b.lookupOpen(s.RequestID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("ledger: settle %s: no open reservation: %w", s.RequestID, ErrNotFound)
	}
	if err := b.price(&s, r); err != nil {
		return err
	}
	res, err := b.q.ExecContext(b.ctx, `UPDATE usage SET state = 1, model = ?, credential = ?, region = CASE WHEN ? = '' THEN region ELSE ? END, attempts = ?, status = ?, error_code = ?,
		input_tokens = ?, output_tokens = ?, total_tokens = ?, cost_micros = ?, latency_ms = ?, cached_input_tokens = ?, reasoning_tokens = ?
		WHERE ts_ms = ? AND request_id = ? AND state = 0`,
		s.Model, s.Credential, s.Region, s.Region, s.Attempts, s.Status, s.ErrorCode,
		s.InputTokens.arg(), s.OutputTokens.arg(), s.TotalTokens.arg(), s.CostMicros.arg(), s.Latency.Milliseconds(),
		s.CachedInputTokens.arg(), s.ReasoningTokens.arg(), r.ts, s.RequestID)
	if err != nil {
		return &dbError{err}
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("ledger: settle %s: no open reservation: %w", s.RequestID, ErrNotFound)
	}
	// The totals trade the reservation for the settled row; the report
	// rollup, which holds settled rows only, gains the row.
	sd := settlementDelta(s)
	t := sd.Totals
	t.Add(reservationDelta().Totals.Neg())
	b.addTotals(r.ts, t)
	nd := dims{operation: r.dim.operation, model: s.Model, credential: s.Credential, client: r.dim.client, status: s.Status}
	b.addDims(r.ts, nd, sd)
	delete(b.opened, s.RequestID)
	b.closed = append(b.closed, s.RequestID)
	if b.w.s.onSettle.Load() != nil {
		b.settled = append(b.settled, Settled{Operation: r.dim.operation, Settlement: s})
	}
	return nil
}

// price sets the cost of a settlement of the open row r, once: a refused
// request (a provider's structured 4xx) records 0 tokens and 0 cost; a
// Decisions row keeps the cost it was given (unknown; refused too); any other row costs
// its tokens at the price taken at admission, or, for a row this process
// did not reserve, the price in force now.
func (b *batch) price(s *Settlement, r openRow) error {
	decisions := r.dim.operation == OperationDecisions
	if s.Refused {
		s.InputTokens, s.OutputTokens, s.TotalTokens = Known(0), Known(0), Known(0)
		s.CachedInputTokens, s.ReasoningTokens, s.CostMicros = Known(0), Known(0), Known(0)
		if decisions {
			s.CostMicros = Count{} // the spec: Decisions cost is unknown
		}
		return nil
	}
	if decisions {
		return nil
	}
	p := r.price
	if !r.reserved {
		q, ok, err := priceOf(b.ctx, b.q, s.Model)
		if err != nil {
			return &dbError{err}
		}
		if ok {
			p = &q
		}
	}
	s.CostMicros = s.Cost(p)
	return nil
}

func (b *batch) release(id string) error {
	r, ok, err := b.lookupOpen(id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("ledger: release %s: no open reservation: %w", id, ErrNotFound)
	}
	res, err := b.q.ExecContext(b.ctx, `DELETE FROM usage WHERE ts_ms = ? AND request_id = ? AND state = 0`, r.ts, id)
	if err != nil {
		return &dbError{err}
	}
	// Nothing deleted, nothing to take off the windows (as settleRow).
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("ledger: release %s: no open reservation: %w", id, ErrNotFound)
	}
	b.addTotals(r.ts, reservationDelta().Totals.Neg())
	delete(b.opened, id)
	b.closed = append(b.closed, id)
	return nil
}

func (b *batch) touch(m map[string]time.Time) error {
	for label, t := range m {
		if _, err := b.q.ExecContext(b.ctx, `UPDATE client_tokens SET last_used_ms = MAX(COALESCE(last_used_ms, 0), ?) WHERE label = ?`, t.UnixMilli(), label); err != nil {
			return &dbError{err}
		}
	}
	return nil
}

// Reserve writes a reservation once admit (which may be nil) accepts it,
// and returns after the commit. An admission refusal is returned as is; a
// database failure, or a lock held by another process for busy_timeout,
// wraps ErrUnavailable. When ctx ends before the reservation is written
// (its deadline passes, or it is cancelled while the write waits for the
// lock), Reserve writes nothing and returns an error wrapping ctx.Err().
func (s *Store) Reserve(ctx context.Context, r Reservation, admit Admitter) error {
	return s.w.submit(ctx, &op{kind: opReserve, res: r, admit: admit})
}

// Settle turns a reservation into its usage row and returns after the
// commit.
func (s *Store) Settle(ctx context.Context, st Settlement) error {
	return s.w.submit(nil, &op{kind: opSettle, settle: st})
}

// Release deletes a reservation of a request that ended before any
// provider call, and returns after the commit.
func (s *Store) Release(ctx context.Context, requestID string) error {
	return s.w.submit(nil, &op{kind: opRelease, id: requestID})
}

// exec runs fn inside the writer's transaction (used for budgets, tokens and
// learned state, so that every write of this process is serialised through
// one connection).
func (s *Store) exec(ctx context.Context, fn func(ctx context.Context, q execQuerier) error) error {
	return s.w.submit(nil, &op{kind: opFunc, fn: fn})
}

// execConfig is exec for changes to budgets or client tokens.
func (s *Store) execConfig(ctx context.Context, fn func(ctx context.Context, q execQuerier) error) error {
	return s.w.submit(nil, &op{kind: opFunc, fn: fn, bumpsConfig: true})
}
