package pgledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotorhq/rotor/ledger"
)

// The group commit (ledger.GroupCommit, the SQLite engine's too): every
// reservation, settlement, release and resolution of this process joins a
// queue; the caller that finds no batch running becomes the leader and
// commits everything queued, batch after batch, while the others wait for
// their batch's commit. A batch is one transaction on one pooled connection
// that first takes the schema's advisory lock, so admission is serialised
// across processes and machines.

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
	// Queued.Ctx, for a reservation, is the request's: a reservation
	// whose request ended before its batch began is not written.
	ledger.Queued
	// deadline is the caller's context's, for every op: the batch gives
	// up then (ErrUnavailable), so that no call outlives its deadline by
	// more than the batch's other callers' (see batchCtx).
	deadline time.Time
	// at is when a reservation was submitted, by the caller's clock: its
	// Expires is stored as the same lifetime from the database's time
	// (batch.reserve), so that a machine whose clock is off does not
	// leave rows the others read as abandoned, or in flight for too long.
	at time.Time
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
	q        ledger.GroupCommit[*op]
	onCommit func(int, time.Duration)

	// owned by the leader:
	cfgVer  int64
	budgets []ledger.BudgetRecord
	tokens  map[[32]byte]string
	prices  map[string]ledger.Price
	open    map[string]openRow
	// lastWindows are the windows ending at lastNow+1ms that the last
	// batch's admissions read, with their totals kept exact by every
	// later write of this process: the next batch carries them (carry.go)
	// while lastVer is the ledger's usage version, or else reads their
	// likely successors in one round trip (prefetch). lastPruned is the
	// prune frontier that batch saw; lastAt its local time.
	lastWindows []lastWindow
	lastNow     int64
	lastVer     int64
	lastPruned  int64
	lastAt      time.Time
	// carriedWait is how many admission batches go the usual way before
	// the next one-round-trip one; carriedBackoff what the next failed
	// guard sets it to (carry.go).
	carriedWait, carriedBackoff int
	// carried counts the batches committed in one round trip.
	carried atomic.Int64
}

func newWriter(s *Store, maxBatch int, onCommit func(int, time.Duration)) *writer {
	w := &writer{s: s, onCommit: onCommit, cfgVer: -1, open: map[string]openRow{}}
	w.q = ledger.GroupCommit[*op]{MaxBatch: maxBatch, InFlight: func() bool { return len(w.open) > 1 }, Run: w.run}
	return w
}

// submit queues o and returns its result once its batch has committed or
// failed.
func (w *writer) submit(ctx context.Context, o *op) error {
	return w.submitWait(ctx, ctx, o)
}

// submitWait is submit for an op that must be recorded even when its
// caller goes (settle, release, resolve): wctx only bounds the batch by
// its deadline.
func (w *writer) submitWait(ctx, wctx context.Context, o *op) error {
	if wctx != nil {
		o.deadline, _ = wctx.Deadline()
	}
	return w.q.Submit(ctx, o)
}

func (w *writer) close() { w.q.Close() }

// run commits ops and answers each. A batch that failed for one of its
// writes (not for the database) is retried one write at a time, so that
// one bad write cannot fail the others.
func (w *writer) run(ops []*op) {
	live := w.q.Live(ops)
	if len(live) == 0 {
		return
	}
	errs, batchErr := w.runBatch(live)
	if batchErr == nil {
		for i, o := range live {
			o.Done <- errs[i]
		}
		return
	}
	if len(live) == 1 || isUnavailable(batchErr) || errors.Is(batchErr, ledger.ErrUnavailable) {
		err := batchErr
		if len(live) == 1 {
			err = opError(live[0], batchErr)
		}
		if len(live) > 1 || isUnavailable(batchErr) {
			err = wrapErr("ledger "+w.s.Location(), batchErr)
		}
		for _, o := range live {
			o.Done <- err
		}
		return
	}
	for _, o := range live {
		w.run([]*op{o})
	}
}

// opError is the error of a batch of the one op o that failed on a
// statement: a request id already stored, or a settlement or release whose
// reservation is no longer open (its guarded statement divided by zero).
func opError(o *op, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch {
	case pe.Code == "23505" && o.kind == opReserve:
		return fmt.Errorf("ledger: request %s: %w", o.res.RequestID, ledger.ErrExists)
	case pe.Code == "22012" && o.kind == opSettle:
		return fmt.Errorf("ledger: settle %s: no open reservation: %w", o.settle.RequestID, ledger.ErrNotFound)
	case pe.Code == "22012" && o.kind == opRelease:
		return fmt.Errorf("ledger: release %s: no open reservation: %w", o.id, ledger.ErrNotFound)
	case pe.Code == "22012" && o.kind == opResolve:
		return fmt.Errorf("ledger settle %s: no such request: %w", o.resolve.RequestID, ledger.ErrNotFound)
	}
	return err
}

// batchCtx bounds a batch: opTimeout, or less when every op's caller has
// a deadline sooner (the latest of them).
func batchCtx(ops []*op) (context.Context, context.CancelFunc) {
	d := time.Now().Add(opTimeout)
	var latest time.Time
	for _, o := range ops {
		if o.deadline.IsZero() {
			latest = d
			break
		}
		if o.deadline.After(latest) {
			latest = o.deadline
		}
	}
	if latest.Before(d) {
		d = latest
	}
	return context.WithDeadline(context.Background(), d)
}

// batchSettings are a batch transaction's own settings (see runBatch):
// its planner's, and how long it may sit idle between its round trips
// while it holds the admission lock. A bridge that stops there (a laptop
// suspended, SIGSTOP, a network gone without a FIN) otherwise held every
// other bridge's admission until the session-wide timeout (2*opTimeout,
// 20 s): the server now ends such a transaction after batchIdleMS, far
// above any round trip, and the batch fails as on a cut connection.
const batchSettings = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true), " +
	"set_config('idle_in_transaction_session_timeout', '" + batchIdleMS + "', true)"

// batchIdleMS is a batch transaction's idle_in_transaction_session_timeout.
const batchIdleMS = "2000"

// batch is one transaction's worth of writes.
type batch struct {
	w    *writer
	ctx  context.Context
	conn *pgxpool.Conn
	now  int64
	view *view
	// pending row statements, sent at the next flush.
	pending []pendingStmt
	// prefetched maps the start of each window prefetch read to how it
	// was derived.
	prefetched map[int64]windowKind
	// unflushed holds the deltas not yet written (rows and rollups), so
	// that a window computed from the database adds them; rowsAhead is
	// set when rows were written without their rollup deltas.
	unflushed []tsTotals
	rowsAhead bool
	minute    map[int64]ledger.Totals
	hour      map[int64]ledger.Totals
	day       map[int64]ledger.Totals
	dims      map[dimKey]delta
	opened    map[string]openRow
	closed    []string
	errs      []error
	committed bool
	// settled are the rows settled by this batch, for Store.OnSettle.
	settled []ledger.Settled
	// readVer is the usage version the batch's first statement read.
	readVer int64
	// nowAt is the local time when the server's clock read now.
	nowAt time.Time
	// lead, when set, reads the results of the batch's first statements
	// in its commit's round trip (a one-round-trip batch, carry.go).
	lead func(pgx.BatchResults) (int, error)
}

func newBatch(w *writer, ctx context.Context, conn *pgxpool.Conn, n int) *batch {
	return &batch{w: w, ctx: ctx, conn: conn, minute: map[int64]ledger.Totals{}, hour: map[int64]ledger.Totals{}, day: map[int64]ledger.Totals{},
		dims: map[dimKey]delta{}, opened: map[string]openRow{}, errs: make([]error, n)}
}

// beginBatch returns a pipeline that begins a batch's transaction: BEGIN,
// its settings, the admission lock.
func (w *writer) beginBatch() *pgx.Batch {
	pb := &pgx.Batch{}
	pb.Queue("BEGIN")
	// The batch's statements are prepared once per connection; left to
	// itself the server plans the window reads anew at every execution
	// (their generic plan looks dearer than it is), which cost more than
	// running them: 0.4-0.9 ms against 0.2 ms each for a 30-day window
	// over 10k rows. The batch's statements all look rows up by key or by
	// time range, where the generic plan is the custom one, provided it
	// uses the index: a generic plan is made once per connection, and one
	// made while a table was small (a new ledger) chose a sequential scan
	// and kept it as the table grew, each batch reading every row (the
	// end-to-end benchmark on PostgreSQL fell from 1,300 to 420 requests a
	// second over 60,000 requests). enable_seqscan off, for the batch's own
	// transaction, keeps every plan on its index.
	pb.Queue(batchSettings)
	pb.Queue("SELECT pg_advisory_xact_lock($1)", w.s.lockKey)
	return pb
}

// pendingStmt is a row statement queued for the next flush. Its effect
// on the rollups is already in the batch's deltas: a statement that
// cannot have it fails (and the batch with it).
type pendingStmt struct {
	sql  string
	args []any
}

func (w *writer) runBatch(ops []*op) ([]error, error) {
	began := time.Now()
	ctx, cancel := batchCtx(ops)
	defer cancel()
	conn, err := w.s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	var b *batch
	defer func() {
		if (b == nil || !b.committed) && !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
			rctx, c := context.WithTimeout(context.Background(), time.Second)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			c()
		}
		conn.Release()
	}()
	b = newBatch(w, ctx, conn, len(ops))
	pb := w.beginBatch()
	if w.needNoRead(ops, false) {
		// Settlements and releases of this process's own reservations
		// need nothing from the database (the reservation's time, dims and
		// price are in memory): begin, lock, write and commit in one
		// round trip instead of two.
		b.view = &view{}
		for i, o := range ops {
			if err := b.apply(i, o); err != nil {
				var dbe *dbError
				if errors.As(err, &dbe) {
					return nil, dbe.err
				}
				b.errs[i] = err
			}
		}
		return b.commit(pb, ops, began, false)
	}
	if cb := w.carriedBatch(ctx, conn, ops, pb); cb != nil {
		b = cb
		errs, err := b.commit(pb, ops, began, true)
		if !errors.Is(err, errStale) {
			if err == nil {
				w.carriedBackoff = 0
				w.carried.Add(1)
			}
			return errs, err
		}
		// Something moved since this process's last commit: roll back
		// and take the usual two round trips, this time and for a while.
		w.carriedWait = w.carriedBackoff
		w.carriedBackoff = min(max(1, 2*w.carriedBackoff), maxCarriedWait)
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			return nil, err
		}
		b = newBatch(w, ctx, conn, len(ops))
		pb = w.beginBatch()
	}
	// One round trip: begin, take the admission lock, then (a statement
	// after the lock, so its snapshot sees every batch committed before)
	// read the change counter, the usage version, the time and the rows
	// that left the carried rolling windows (headSQL).
	var testNow *int64
	var nowT time.Time
	estNow := w.lastNow + time.Since(w.lastAt).Milliseconds()
	if w.s.clk != nil {
		nowT = w.s.clk.Now()
		ms := nowT.UnixMilli()
		testNow, estNow = &ms, ms
	}
	slide := w.queueHead(pb, testNow, estNow)
	br := conn.SendBatch(ctx, pb)
	for range 3 { // BEGIN, the settings, the lock
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	var h head
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			h, err = readHead(rows, len(slide))
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	cv, prunedUntil := h.cfgVer, h.prunedUntil
	b.now, b.readVer, b.nowAt = h.now, h.usageVer, time.Now()
	if w.s.clk == nil {
		nowT = time.UnixMilli(b.now).UTC()
	}
	if cv != w.cfgVer {
		if err := w.loadConfig(ctx, conn); err != nil {
			return nil, err
		}
		w.cfgVer = cv
	}
	b.view = &view{ctx: ctx, q: conn, now: nowT, budgets: w.budgets, flush: b.flushAll, pending: b.pendingIn, cache: map[[2]int64]ledger.Totals{}, prunedUntil: prunedUntil}
	order := reservesFirst(ops)
	if len(order) > 0 && ops[order[0]].kind == opReserve && ops[order[0]].admit != nil && !b.carry(h, slide) {
		if err := b.prefetch(); err != nil {
			return nil, err
		}
	}
	for _, i := range order {
		o := ops[i]
		if err := b.apply(i, o); err != nil {
			var dbe *dbError
			if errors.As(err, &dbe) {
				return nil, dbe.err
			}
			b.errs[i] = err
		}
	}
	return b.commit(&pgx.Batch{}, ops, began, len(order) > 0 && ops[order[0]].kind == opReserve)
}

// commit sends pb (the batch's first statements, or none), the batch's
// writes and COMMIT in one round trip. admitted says the batch wrote
// reservations: the windows they read are the next batch's to prefetch. A
// batch of settlements leaves them as they were, so that admissions
// alternating with settlements (the usual traffic, and all of it with one
// caller) still find theirs prefetched.
func (b *batch) commit(pb *pgx.Batch, ops []*op, began time.Time, admitted bool) ([]error, error) {
	w := b.w
	b.queueRows(pb)
	b.queueRollups(pb)
	pb.Queue(bumpUsageVersion)
	pb.Queue("COMMIT")
	ver, err := sendCommit(b.ctx, b.conn, pb, b.lead)
	if err != nil {
		return nil, err
	}
	b.committed = true
	b.keepCarry(ver, b.readVer, admitted)
	if admitted {
		w.lastAt = b.nowAt
	}
	if w.onCommit != nil {
		w.onCommit(len(ops), time.Since(began))
	}
	if fn := w.s.onSettle.Load(); fn != nil {
		for _, x := range b.settled {
			(*fn)(x)
		}
	}
	for id, r := range b.opened {
		w.open[id] = r
	}
	for _, id := range b.closed {
		delete(w.open, id)
	}
	return b.errs, nil
}

// needNoRead reports whether ops are all settlements and releases of
// reservations this process wrote (each at most once), and, with
// reserves, reservations, so that a batch can apply them without reading
// anything.
func (w *writer) needNoRead(ops []*op, reserves bool) bool {
	seen := make(map[string]bool, len(ops))
	for _, o := range ops {
		var id string
		switch o.kind {
		case opSettle:
			id = o.settle.RequestID
		case opRelease:
			id = o.id
		case opReserve:
			if reserves {
				continue
			}
			return false
		default:
			return false
		}
		if _, own := w.open[id]; !own || seen[id] {
			return false
		}
		seen[id] = true
	}
	return true
}

// maxPrefetch bounds the windows prefetch reads.
const maxPrefetch = 16

// prefetch reads, in one round trip, the windows the batch's admissions
// will likely ask for: each window the last batch read, as a rolling
// window (slid by the time since) and as a calendar one (the same start),
// both ending now. An admission then finds its windows in the view's
// cache instead of reading them one round trip each; a window not
// prefetched is read when asked.
func (b *batch) prefetch() error {
	w := b.w
	if len(w.lastWindows) == 0 {
		return nil
	}
	t := b.now + 1
	var keys [][2]int64
	b.prefetched = map[int64]windowKind{}
	for _, lw := range w.lastWindows {
		for _, c := range []struct {
			kind windowKind
			f    int64
		}{{rolling, lw.from + (b.now - w.lastNow)}, {calendar, lw.from}} {
			if lw.kind&c.kind == 0 || c.f >= t {
				continue
			}
			if k, seen := b.prefetched[c.f]; seen {
				b.prefetched[c.f] = k | c.kind
				continue
			}
			if len(keys) < maxPrefetch {
				b.prefetched[c.f] = c.kind
				keys = append(keys, [2]int64{c.f, t})
			}
		}
	}
	pb := &pgx.Batch{}
	for _, k := range keys {
		q, args := totalsSQL(parts(k[0], through(k[1], b.now), b.now))
		pb.Queue(q, args...)
	}
	br := b.conn.SendBatch(b.ctx, pb)
	for _, k := range keys {
		var x ledger.Totals
		if err := br.QueryRow().Scan(&x.Requests, &x.Tokens, &x.TokensUnknown, &x.CostMicros, &x.CostUnknown); err != nil {
			br.Close()
			return err
		}
		b.view.cache[k] = x
	}
	return br.Close()
}

// windowKind tells how a window's start moves from batch to batch: with
// the clock (rolling), not at all (calendar), or either (not known yet).
type windowKind int

const (
	rolling windowKind = 1 << iota
	calendar
	eitherKind = rolling | calendar
)

// lastWindow is a window an admission read, ending at the batch's now,
// with its totals as the batch committed them.
type lastWindow struct {
	from   int64
	kind   windowKind
	totals ledger.Totals
}

// lastWindows returns the windows this batch's admissions read, each with
// its kind as far as prefetch could tell it, so that the next batch reads
// only the successor it needs.
func (b *batch) lastWindows() []lastWindow {
	var out []lastWindow
	seen := map[int64]bool{}
	for _, k := range b.view.used {
		if seen[k[0]] {
			continue
		}
		seen[k[0]] = true
		kind, ok := b.prefetched[k[0]]
		if !ok {
			kind = eitherKind
		}
		out = append(out, lastWindow{from: k[0], kind: kind, totals: b.view.cache[k]})
	}
	return out
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

type tsTotals struct {
	ts int64
	t  ledger.Totals
}

// pendingIn sums the unflushed deltas in [f, t); ok is false when the
// database holds rows whose rollup deltas it does not (then flush first).
func (b *batch) pendingIn(f, t int64) (ledger.Totals, bool) {
	var sum ledger.Totals
	if b.rowsAhead {
		return sum, false
	}
	for _, d := range b.unflushed {
		if d.ts >= f && d.ts < t {
			sum.Add(d.t)
		}
	}
	return sum, true
}

// addRow records a row's delta at ts in the rollups and in the view's
// cached windows.
func (b *batch) addRow(ts int64, d dims, x delta) {
	m, h := ledger.FloorTo(ts, minuteMS)/minuteMS, ledger.FloorTo(ts, hourMS)/hourMS
	t := b.minute[m]
	t.Add(x.t)
	b.minute[m] = t
	t = b.hour[h]
	t.Add(x.t)
	b.hour[h] = t
	dy := ledger.FloorTo(ts, dayMS) / dayMS
	t = b.day[dy]
	t.Add(x.t)
	b.day[dy] = t
	k := dimKey{hour: h, dims: d}
	dd := b.dims[k]
	dd.add(x)
	b.dims[k] = dd
	b.view.applyDelta(ts, x.t)
	b.unflushed = append(b.unflushed, tsTotals{ts, x.t})
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
	// Times come from the database's clock: the reservation lives as long
	// from ts as its caller gave it from o.at.
	expires := ledger.SatAdd(ts, r.Expires.Sub(o.at).Milliseconds())
	b.pending = append(b.pending, pendingStmt{
		sql:  `INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, pool, model, region, client) VALUES ($1, $2, 0, $3, $4, $5, $6, $7, $8)`,
		args: []any{r.RequestID, ts, expires, r.Operation, r.Pool, r.Model, r.Region, r.Client},
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
	if s.ForgetUnreadable() && !b.w.s.warnedUsage.Swap(true) {
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
		sql: guarded(`UPDATE usage SET state = 1, model = $1, credential = $2, region = CASE WHEN $3 = '' THEN region ELSE $3 END, attempts = $4, status = $5, error_code = $6,
  input_tokens = $7, output_tokens = $8, total_tokens = $9, cost_micros = $10, latency_ms = $11, cached_input_tokens = $12, reasoning_tokens = $13
  WHERE request_id = $14 AND state = 0`),
		args: []any{s.Model, s.Credential, s.Region, s.Attempts, s.Status, s.ErrorCode,
			arg(s.InputTokens), arg(s.OutputTokens), arg(s.TotalTokens), arg(s.CostMicros), s.Latency.Milliseconds(),
			arg(s.CachedInputTokens), arg(s.ReasoningTokens), s.RequestID},
	})
	// The open reservation becomes the settled row.
	b.addRow(r.ts, r.dim, reservationDelta().neg())
	b.addRow(r.ts, nd, sd)
	delete(b.opened, s.RequestID)
	b.closed = append(b.closed, s.RequestID)
	if b.w.s.onSettle.Load() != nil {
		b.settled = append(b.settled, ledger.Settled{Operation: r.dim.operation, Settlement: s})
	}
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
	s.CostMicros = s.Cost(p)
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
		sql:  guarded(`DELETE FROM usage WHERE request_id = $1 AND state = 0`),
		args: []any{id},
	})
	b.addRow(r.ts, r.dim, reservationDelta().neg())
	delete(b.opened, id)
	b.closed = append(b.closed, id)
	return nil
}

// guarded makes a statement that must change exactly one row fail (with
// division_by_zero, 22012) when it changes none: the batch then rolls back
// and its ops are retried one by one, where opError names the op's error.
func guarded(q string) string {
	return `WITH w AS (` + q + ` RETURNING 1) SELECT 1 / (SELECT COUNT(*)::int FROM w)`
}

// queueRows moves the pending row statements into pb.
func (b *batch) queueRows(pb *pgx.Batch) {
	for _, p := range b.pending {
		pb.Queue(p.sql, p.args...)
	}
	b.pending = b.pending[:0]
}

// flushRows writes the pending row statements in one round trip (their
// rollup deltas stay pending).
func (b *batch) flushRows() error {
	if len(b.pending) == 0 {
		return nil
	}
	pb := &pgx.Batch{}
	b.queueRows(pb)
	b.rowsAhead = true
	return b.conn.SendBatch(b.ctx, pb).Close()
}

// flushAll writes everything pending, rows and rollups, so that a query
// of this transaction sees the batch's writes.
func (b *batch) flushAll() error {
	pb := &pgx.Batch{}
	b.queueRows(pb)
	b.queueRollups(pb)
	b.unflushed, b.rowsAhead = b.unflushed[:0], false
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
	upsertDay    = upsertTotals("usage_day")
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
	for k, t := range b.day {
		pb.Queue(upsertDay, k, t.Requests, t.Tokens, t.TokensUnknown, t.CostMicros, t.CostUnknown)
	}
	for k, d := range b.dims {
		pb.Queue(upsertDims, k.hour, k.operation, k.model, k.credential, k.client, k.status,
			d.t.Requests, d.input, d.output, d.t.Tokens, d.t.TokensUnknown, d.t.CostMicros, d.t.CostUnknown, d.errors,
			d.inputNull, d.outputNull, d.cached, d.cachedNull, d.reasoning, d.reasoningNull)
	}
	clear(b.minute)
	clear(b.hour)
	clear(b.day)
	clear(b.dims)
}

// Reserve writes a reservation once admit (which may be nil) accepts it,
// in a batch transaction that holds the schema's admission lock, and
// returns after the commit.
func (s *Store) Reserve(ctx context.Context, r ledger.Reservation, admit ledger.Admitter) error {
	local := cmp.Or(s.local, s.clk)
	at := time.Now()
	if local != nil {
		at = local.Now()
	}
	return s.w.submit(ctx, &op{kind: opReserve, res: r, admit: admit, at: at})
}

// Settle turns a reservation into its usage row and returns after the
// commit.
func (s *Store) Settle(ctx context.Context, st ledger.Settlement) error {
	return s.w.submitWait(nil, ctx, &op{kind: opSettle, settle: st})
}

// Release deletes a reservation of a request that sent nothing upstream.
func (s *Store) Release(ctx context.Context, requestID string) error {
	return s.w.submitWait(nil, ctx, &op{kind: opRelease, id: requestID})
}
