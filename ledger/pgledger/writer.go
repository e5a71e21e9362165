package pgledger

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotorhq/rotor/ledger"
)

// The group commit: every reservation, settlement, release and resolution
// of this process joins a queue; the caller that finds no batch running
// becomes the leader and commits everything queued, batch after batch,
// while the others wait for their batch's commit. A batch is one
// transaction on one pooled connection that first takes the schema's
// advisory lock, so admission is serialised across processes and machines.

type opKind int

const (
	opReserve opKind = iota
	opSettle
	opRelease
	opResolve
)

type op struct {
	kind    opKind
	res     ledger.Reservation
	admit   ledger.Admitter
	settle  ledger.Settlement
	resolve ledger.Resolution
	id      string
	// ctx, for a reservation, is the request's: a reservation whose
	// request ended before its batch began is not written.
	ctx  context.Context
	done chan error
}

// openRow is what this process remembers of a reservation it wrote, so
// that settling it needs no read.
type openRow struct {
	ts  int64
	dim dims
	// price is the model's price at admission (nil: none, or Decisions).
	price *ledger.Price
}

type writer struct {
	s        *Store
	maxBatch int
	onCommit func(int, time.Duration)

	mu      sync.Mutex
	idle    *sync.Cond
	closed  bool
	leading bool
	queue   []*op

	// owned by the leader:
	cfgVer  int64
	budgets []ledger.BudgetRecord
	tokens  map[[32]byte]string
	prices  map[string]ledger.Price
	open    map[string]openRow
}

func newWriter(s *Store, maxBatch int, onCommit func(int, time.Duration)) *writer {
	w := &writer{s: s, maxBatch: maxBatch, onCommit: onCommit, cfgVer: -1, open: map[string]openRow{}}
	w.idle = sync.NewCond(&w.mu)
	return w
}

// submit queues o and returns its result once its batch has committed or
// failed.
func (w *writer) submit(ctx context.Context, o *op) error {
	if ctx != nil && ctx.Done() != nil {
		if err := ctx.Err(); err != nil {
			return gaveUp(err)
		}
		o.ctx = ctx
	}
	o.done = make(chan error, 1)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ledger.ErrClosed
	}
	w.queue = append(w.queue, o)
	if w.leading {
		w.mu.Unlock()
		return w.wait(o)
	}
	w.lead()
	w.mu.Unlock()
	return <-o.done
}

// wait waits for o's result; an op whose context ends while it is still
// queued leaves the queue. An op already in a batch has its result soon:
// a batch never outlives opTimeout.
func (w *writer) wait(o *op) error {
	if o.ctx == nil {
		return <-o.done
	}
	select {
	case err := <-o.done:
		return err
	case <-o.ctx.Done():
	}
	w.mu.Lock()
	for i, q := range w.queue {
		if q == o {
			w.queue = append(w.queue[:i], w.queue[i+1:]...)
			w.mu.Unlock()
			return gaveUp(o.ctx.Err())
		}
	}
	w.mu.Unlock()
	return <-o.done
}

func gaveUp(err error) error {
	return fmt.Errorf("ledger: reservation not written: %w", err)
}

func (w *writer) lead() {
	w.leading = true
	for len(w.queue) > 0 {
		if len(w.queue) < w.maxBatch && (len(w.queue) > 1 || len(w.open) > 1) {
			// Others are in flight: let them reach their writes so that
			// the batch takes many at once.
			w.mu.Unlock()
			runtime.Gosched()
			w.mu.Lock()
		}
		n := min(len(w.queue), w.maxBatch)
		batch := make([]*op, n)
		copy(batch, w.queue)
		w.queue = append(w.queue[:0], w.queue[n:]...)
		w.mu.Unlock()
		w.run(batch)
		w.mu.Lock()
	}
	w.leading = false
	w.idle.Broadcast()
}

func (w *writer) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	for w.leading {
		w.idle.Wait()
	}
	if len(w.queue) > 0 {
		w.lead()
	}
}

// run commits ops and answers each. A batch that failed for one of its
// writes (not for the database) is retried one write at a time, so that
// one bad write cannot fail the others.
func (w *writer) run(ops []*op) {
	live := ops[:0:0]
	for _, o := range ops {
		if o.ctx != nil && o.ctx.Err() != nil {
			o.done <- gaveUp(o.ctx.Err())
			continue
		}
		live = append(live, o)
	}
	if len(live) == 0 {
		return
	}
	errs, batchErr := w.runBatch(live)
	if batchErr == nil {
		for i, o := range live {
			o.done <- errs[i]
		}
		return
	}
	if len(live) == 1 || isUnavailable(batchErr) || errors.Is(batchErr, ledger.ErrUnavailable) {
		err := batchErr
		if len(live) > 1 || isUnavailable(err) {
			err = wrapErr("ledger "+w.s.Location(), batchErr)
		}
		for _, o := range live {
			o.done <- err
		}
		return
	}
	for _, o := range live {
		w.run([]*op{o})
	}
}

// batchCtx bounds a batch: opTimeout, or less when every op is a
// reservation whose request ends sooner (the latest of their deadlines).
func batchCtx(ops []*op) (context.Context, context.CancelFunc) {
	d := time.Now().Add(opTimeout)
	var latest time.Time
	for _, o := range ops {
		dl, ok := time.Time{}, false
		if o.ctx != nil {
			dl, ok = o.ctx.Deadline()
		}
		if !ok {
			latest = d
			break
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	if latest.Before(d) {
		d = latest
	}
	return context.WithDeadline(context.Background(), d)
}

// batch is one transaction's worth of writes.
type batch struct {
	w    *writer
	ctx  context.Context
	conn *pgxpool.Conn
	now  int64
	view *view
	// pending row statements, sent at the next flush.
	pending []pendingStmt
	minute  map[int64]ledger.Totals
	hour    map[int64]ledger.Totals
	dims    map[dimKey]delta
	opened  map[string]openRow
	closed  []string
	errs    []error
}

// pendingStmt is a row statement queued for the next flush; after, when
// set, judges how many rows it changed (and records the op's result).
type pendingStmt struct {
	sql   string
	args  []any
	after func(rows int64)
}

func (w *writer) runBatch(ops []*op) ([]error, error) {
	began := time.Now()
	ctx, cancel := batchCtx(ops)
	defer cancel()
	conn, err := w.s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed && !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
			rctx, c := context.WithTimeout(context.Background(), time.Second)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			c()
		}
		conn.Release()
	}()
	b := &batch{w: w, ctx: ctx, conn: conn, minute: map[int64]ledger.Totals{}, hour: map[int64]ledger.Totals{},
		dims: map[dimKey]delta{}, opened: map[string]openRow{}, errs: make([]error, len(ops))}
	// One round trip: begin, take the admission lock, then (a statement
	// after the lock, so its snapshot sees every batch committed before)
	// read the change counter and the time.
	pb := &pgx.Batch{}
	pb.Queue("BEGIN")
	pb.Queue("SELECT pg_advisory_xact_lock($1)", w.s.lockKey)
	pb.Queue("SELECT value, " + msNow + " FROM meta WHERE key = 'config_version'")
	br := conn.SendBatch(ctx, pb)
	var cv int64
	_, err = br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = br.QueryRow().Scan(&cv, &b.now)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	nowT := time.UnixMilli(b.now).UTC()
	if w.s.clk != nil {
		nowT = w.s.clk.Now()
		b.now = nowT.UnixMilli()
	}
	if cv != w.cfgVer {
		if err := w.loadConfig(ctx, conn); err != nil {
			return nil, err
		}
		w.cfgVer = cv
	}
	b.view = &view{ctx: ctx, q: conn, now: nowT, budgets: w.budgets, flush: b.flushAll, cache: map[[2]int64]ledger.Totals{}}
	for i, o := range ops {
		if err := b.apply(i, o); err != nil {
			var dbe *dbError
			if errors.As(err, &dbe) {
				return nil, dbe.err
			}
			b.errs[i] = err
		}
	}
	if err := b.flushRows(); err != nil {
		return nil, err
	}
	pb = &pgx.Batch{}
	b.queueRollups(pb)
	pb.Queue("COMMIT")
	if err := conn.SendBatch(ctx, pb).Close(); err != nil {
		return nil, err
	}
	committed = true
	if w.onCommit != nil {
		w.onCommit(len(ops), time.Since(began))
	}
	for id, r := range b.opened {
		w.open[id] = r
	}
	for _, id := range b.closed {
		delete(w.open, id)
	}
	return b.errs, nil
}

// loadConfig reads budgets, client tokens and prices (the change counter
// moved).
func (w *writer) loadConfig(ctx context.Context, q querier) error {
	bs, err := listBudgets(ctx, q)
	if err != nil {
		return err
	}
	toks, err := loadTokens(ctx, q)
	if err != nil {
		return err
	}
	ps, err := listPrices(ctx, q)
	if err != nil {
		return err
	}
	w.budgets, w.tokens, w.prices = bs, toks, ps
	w.s.tokens.Store(&toks)
	return nil
}

// dbError marks a database failure inside a batch (the batch rolls back),
// as opposed to a refusal of one op.
type dbError struct{ err error }

func (e *dbError) Error() string { return e.err.Error() }
func (e *dbError) Unwrap() error { return e.err }

func (b *batch) apply(i int, o *op) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &dbError{fmt.Errorf("ledger: write panicked: %v", p)}
		}
	}()
	switch o.kind {
	case opReserve:
		return b.reserve(i, o)
	case opSettle:
		return b.settleRow(i, o.settle)
	case opRelease:
		return b.release(i, o.id)
	case opResolve:
		return b.resolveRow(i, o.resolve)
	}
	return fmt.Errorf("ledger: unknown op %d", o.kind)
}

// addRow records a row's delta at ts in the rollups and in the view's
// cached windows.
func (b *batch) addRow(ts int64, d dims, x delta) {
	m, h := floorTo(ts, minuteMS)/minuteMS, floorTo(ts, hourMS)/hourMS
	t := b.minute[m]
	addT(&t, x.t)
	b.minute[m] = t
	t = b.hour[h]
	addT(&t, x.t)
	b.hour[h] = t
	k := dimKey{hour: h, dims: d}
	dd := b.dims[k]
	dd.add(x)
	b.dims[k] = dd
	b.view.applyDelta(ts, x.t)
}

func (b *batch) reserve(i int, o *op) error {
	r := o.res
	if r.RequestID == "" {
		return errors.New("ledger: reservation without request id")
	}
	if _, dup := b.w.open[r.RequestID]; dup {
		return fmt.Errorf("ledger: request %s: %w", r.RequestID, ledger.ErrExists)
	}
	if _, dup := b.opened[r.RequestID]; dup {
		return fmt.Errorf("ledger: request %s: %w", r.RequestID, ledger.ErrExists)
	}
	if r.CheckToken {
		if _, ok := b.w.tokens[r.Token]; !ok {
			return ledger.ErrTokenRevoked
		}
	}
	var price *ledger.Price
	if r.Operation != ledger.OperationDecisions {
		if p, ok := b.w.prices[r.Model]; ok {
			price, r.Priced = &p, true
		}
	}
	if o.admit != nil {
		if err := o.admit.Admit(b.view, r); err != nil {
			return err
		}
	}
	ts := b.now
	b.pending = append(b.pending, pendingStmt{
		sql:  `INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, pool, model, region, client) VALUES ($1, $2, 0, $3, $4, $5, $6, $7, $8)`,
		args: []any{r.RequestID, ts, r.Expires.UnixMilli(), r.Operation, r.Pool, r.Model, r.Region, r.Client},
	})
	d := dims{operation: r.Operation, model: r.Model, client: r.Client}
	b.addRow(ts, d, reservationDelta())
	b.opened[r.RequestID] = openRow{ts: ts, dim: d, price: price}
	return nil
}

// lookupOpen finds the open reservation id: in memory when this process
// wrote it, else read (locked) from the database.
func (b *batch) lookupOpen(id string) (r openRow, own, ok bool, err error) {
	if r, ok := b.opened[id]; ok {
		return r, true, true, nil
	}
	if r, ok := b.w.open[id]; ok {
		for _, c := range b.closed {
			if c == id {
				return r, true, false, nil
			}
		}
		return r, true, true, nil
	}
	if err := b.flushRows(); err != nil {
		return r, false, false, &dbError{err}
	}
	err = b.conn.QueryRow(b.ctx, `SELECT ts_ms, operation, model, client FROM usage WHERE request_id = $1 AND state = 0 FOR UPDATE`, id).
		Scan(&r.ts, &r.dim.operation, &r.dim.model, &r.dim.client)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, false, nil
	}
	if err != nil {
		return r, false, false, &dbError{err}
	}
	return r, false, true, nil
}

func (b *batch) settleRow(i int, s ledger.Settlement) error {
	if readableSettlement(&s) && !b.w.s.warnedUsage.Swap(true) {
		b.w.s.log.Warn("ledger: provider usage outside 0..10^12 recorded as unknown (logged once)", "request_id", s.RequestID)
	}
	r, own, ok, err := b.lookupOpen(s.RequestID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("ledger: settle %s: no open reservation: %w", s.RequestID, ledger.ErrNotFound)
	}
	b.price(&s, r, own)
	nd := dims{operation: r.dim.operation, model: s.Model, credential: s.Credential, client: r.dim.client, status: s.Status}
	sd := rowDelta(s)
	b.pending = append(b.pending, pendingStmt{
		sql: `UPDATE usage SET state = 1, model = $1, credential = $2, region = CASE WHEN $3 = '' THEN region ELSE $3 END, attempts = $4, status = $5, error_code = $6,
  input_tokens = $7, output_tokens = $8, total_tokens = $9, cost_micros = $10, latency_ms = $11, cached_input_tokens = $12, reasoning_tokens = $13
  WHERE request_id = $14 AND state = 0`,
		args: []any{s.Model, s.Credential, s.Region, s.Attempts, s.Status, s.ErrorCode,
			arg(s.InputTokens), arg(s.OutputTokens), arg(s.TotalTokens), arg(s.CostMicros), s.Latency.Milliseconds(),
			arg(s.CachedInputTokens), arg(s.ReasoningTokens), s.RequestID},
		after: func(n int64) {
			if n != 1 {
				b.errs[i] = fmt.Errorf("ledger: settle %s: no open reservation: %w", s.RequestID, ledger.ErrNotFound)
				return
			}
			// The open reservation becomes the settled row.
			b.addRow(r.ts, r.dim, reservationDelta().neg())
			b.addRow(r.ts, nd, sd)
		},
	})
	delete(b.opened, s.RequestID)
	b.closed = append(b.closed, s.RequestID)
	return nil
}

// price sets a settlement's cost as the SQLite ledger does: a refused
// request costs 0 (Decisions: unknown); a Decisions row keeps its given
// (unknown) cost; any other row costs its tokens at the price taken at
// admission, or, for a row this process did not reserve, the price now.
func (b *batch) price(s *ledger.Settlement, r openRow, own bool) {
	decisions := r.dim.operation == ledger.OperationDecisions
	if s.Refused {
		s.InputTokens, s.OutputTokens, s.TotalTokens = ledger.Known(0), ledger.Known(0), ledger.Known(0)
		s.CachedInputTokens, s.ReasoningTokens, s.CostMicros = ledger.Known(0), ledger.Known(0), ledger.Known(0)
		if decisions {
			s.CostMicros = ledger.Count{}
		}
		return
	}
	if decisions {
		return
	}
	p := r.price
	if !own {
		p = nil
		if q, ok := b.w.prices[s.Model]; ok {
			p = &q
		}
	}
	s.CostMicros = costOf(p, s.InputTokens, s.CachedInputTokens, s.OutputTokens)
}

func (b *batch) release(i int, id string) error {
	r, _, ok, err := b.lookupOpen(id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("ledger: release %s: no open reservation: %w", id, ledger.ErrNotFound)
	}
	b.pending = append(b.pending, pendingStmt{
		sql:  `DELETE FROM usage WHERE request_id = $1 AND state = 0`,
		args: []any{id},
		after: func(n int64) {
			if n != 1 {
				b.errs[i] = fmt.Errorf("ledger: release %s: no open reservation: %w", id, ledger.ErrNotFound)
				return
			}
			b.addRow(r.ts, r.dim, reservationDelta().neg())
		},
	})
	delete(b.opened, id)
	b.closed = append(b.closed, id)
	return nil
}

// flushRows sends the pending row statements in one round trip and
// applies their results.
func (b *batch) flushRows() error {
	if len(b.pending) == 0 {
		return nil
	}
	pend := b.pending
	b.pending = nil
	pb := &pgx.Batch{}
	for _, p := range pend {
		pb.Queue(p.sql, p.args...)
	}
	br := b.conn.SendBatch(b.ctx, pb)
	tags := make([]pgconn.CommandTag, len(pend))
	var err error
	for i := range pend {
		if tags[i], err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return fmt.Errorf("ledger: request already written: %w", ledger.ErrExists)
		}
		return err
	}
	for i, p := range pend {
		if p.after != nil {
			p.after(tags[i].RowsAffected())
		}
	}
	return nil
}

// flushAll writes everything pending, rows and rollups, so that a query
// of this transaction sees the batch's writes.
func (b *batch) flushAll() error {
	if err := b.flushRows(); err != nil {
		return err
	}
	pb := &pgx.Batch{}
	b.queueRollups(pb)
	if pb.Len() == 0 {
		return nil
	}
	return b.conn.SendBatch(b.ctx, pb).Close()
}

var (
	upsertTotals = func(table string) string {
		return `INSERT INTO ` + table + ` AS u (bucket, requests, tokens, tokens_null, cost_micros, cost_null) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (bucket) DO UPDATE SET requests = ` + addSat("u.requests", "excluded.requests") + `, tokens = ` + addSat("u.tokens", "excluded.tokens") +
			`, tokens_null = ` + addSat("u.tokens_null", "excluded.tokens_null") + `, cost_micros = ` + addSat("u.cost_micros", "excluded.cost_micros") +
			`, cost_null = ` + addSat("u.cost_null", "excluded.cost_null")
	}
	upsertMinute = upsertTotals("usage_minute")
	upsertHour   = upsertTotals("usage_hour")
	dimCols      = []string{"requests", "input_tokens", "output_tokens", "total_tokens", "tokens_null", "cost_micros", "cost_null", "errors",
		"input_null", "output_null", "cached_input_tokens", "cached_null", "reasoning_tokens", "reasoning_null"}
	upsertDims = func() string {
		q := `INSERT INTO usage_hour_dims AS u (bucket, operation, model, credential, client, status`
		vals := `$1, $2, $3, $4, $5, $6`
		set := ""
		for i, c := range dimCols {
			q += ", " + c
			vals += fmt.Sprintf(", $%d", i+7)
			if i > 0 {
				set += ", "
			}
			set += c + " = " + addSat("u."+c, "excluded."+c)
		}
		return q + `) VALUES (` + vals + `) ON CONFLICT (bucket, operation, model, credential, client, status) DO UPDATE SET ` + set
	}()
)

// queueRollups queues one upsert per rollup row the batch changed, and
// empties the batch's deltas.
func (b *batch) queueRollups(pb *pgx.Batch) {
	for k, t := range b.minute {
		pb.Queue(upsertMinute, k, t.Requests, t.Tokens, t.TokensUnknown, t.CostMicros, t.CostUnknown)
	}
	for k, t := range b.hour {
		pb.Queue(upsertHour, k, t.Requests, t.Tokens, t.TokensUnknown, t.CostMicros, t.CostUnknown)
	}
	for k, d := range b.dims {
		pb.Queue(upsertDims, k.hour, k.operation, k.model, k.credential, k.client, k.status,
			d.t.Requests, d.input, d.output, d.t.Tokens, d.t.TokensUnknown, d.t.CostMicros, d.t.CostUnknown, d.errors,
			d.inputNull, d.outputNull, d.cached, d.cachedNull, d.reasoning, d.reasoningNull)
	}
	clear(b.minute)
	clear(b.hour)
	clear(b.dims)
}

// Reserve writes a reservation once admit (which may be nil) accepts it,
// in a batch transaction that holds the schema's admission lock, and
// returns after the commit.
func (s *Store) Reserve(ctx context.Context, r ledger.Reservation, admit ledger.Admitter) error {
	return s.w.submit(ctx, &op{kind: opReserve, res: r, admit: admit})
}

// Settle turns a reservation into its usage row and returns after the
// commit.
func (s *Store) Settle(ctx context.Context, st ledger.Settlement) error {
	return s.w.submit(nil, &op{kind: opSettle, settle: st})
}

// Release deletes a reservation of a request that sent nothing upstream.
func (s *Store) Release(ctx context.Context, requestID string) error {
	return s.w.submit(nil, &op{kind: opRelease, id: requestID})
}
