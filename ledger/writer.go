package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Admitter decides, inside the writer's transaction, whether a reservation
// may be written. Returning an error refuses it; the error reaches the
// caller of Reserve unchanged.
//
// Admit may run more than once for one reservation, and only its last run
// decides: a batch that failed is retried one write at a time, and the
// PostgreSQL engine may first decide against windows that still hold rows
// that left them (pgledger, carry.go). So Admit has no effect but its
// answer, and it is monotone: what it admits against a view it admits
// against any view of no larger totals (budgets.Admitter is both).
type Admitter interface {
	Admit(r WindowReader, res Reservation) error
}

type opKind int

const (
	opReserve opKind = iota
	opSettle
	opRelease
	opTouch
	opFunc
	opResolve
)

type op struct {
	kind   opKind
	res    Reservation
	admit  Admitter
	settle Settlement
	// resolve is an operator's usage for a row of unknown usage.
	resolve Resolution
	id      string
	touch   map[string]time.Time
	fn      func(ctx context.Context, q execQuerier) error
	// bumpsConfig marks fn as a change to budgets or tokens.
	bumpsConfig bool
	// Queued.Ctx, for a reservation, is the request's: the write is given
	// up, before it begins, when the request's deadline passes or its
	// caller goes. Other writes have none: their usage must be recorded.
	Queued
	// deadline is when the op has waited busy_timeout: a lock held by
	// another connection fails it then, whatever batch it is in.
	deadline time.Time
}

type execQuerier interface {
	querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// writer owns one connection and commits every usage write in batches,
// through the group commit both engines share (GroupCommit).
type writer struct {
	s    *Store
	conn *sql.Conn
	q    GroupCommit[*op]
	// busy is busy_timeout; curBusy the value the connection has now (see
	// begin).
	busy, curBusy time.Duration

	stmts    map[string]*sql.Stmt
	onCommit func(int, time.Duration)

	// owned by the leader:
	dataVer int64
	cfgVer  int64
	budgets []BudgetRecord
	tokens  map[[32]byte]string
	prices  map[string]Price
	open    map[string]openRow
	windows windowCache
	lastNow time.Time
	batch   batch
	// hourUntil is the hour rollup's frontier (see rollHours) and
	// foldUntil the minute and report rollups' (see fold), as last read or
	// written; -1 when unknown. sync re-reads them when another connection
	// has committed, so inside a batch they are the database's.
	hourUntil int64
	foldUntil int64
	// prunedUntil is the prune frontier (prune.go), read with foldUntil.
	prunedUntil int64
	// unfolded counts the reservations written since the last fold that
	// caught up with the clock.
	unfolded int
	// cfgStale: another connection committed since budgets and tokens were
	// last checked.
	cfgStale bool
	// foldRows, foldChunk and foldAge tune fold (constants; tests lower them).
	foldRows, foldChunk int
	foldAge             int64
}

func newWriter(ctx context.Context, s *Store, maxBatch int, busy time.Duration, onCommit func(int, time.Duration)) (*writer, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	w := &writer{
		s: s, conn: conn, busy: busy, curBusy: busy,
		stmts:     map[string]*sql.Stmt{},
		open:      map[string]openRow{},
		cfgVer:    -1,
		onCommit:  onCommit,
		hourUntil: -1,
		foldUntil: -1,
		foldRows:  foldRows,
		foldChunk: foldChunk,
		foldAge:   foldAge,
	}
	w.q = GroupCommit[*op]{MaxBatch: maxBatch, InFlight: func() bool { return len(w.open) > 1 }, Run: w.run}
	return w, nil
}

// submit queues o and waits for its commit, at most busy_timeout for a
// lock held by another connection. ctx (nil for writes that must be
// recorded) gives the write up while it has not begun: a cancelled request
// never interrupts a statement, which would roll back the whole batch.
func (w *writer) submit(ctx context.Context, o *op) error {
	if w.s.readOnly {
		return fmt.Errorf("%s: %w (check the file's permissions)", w.s.path, ErrReadOnly)
	}
	o.deadline = time.Now().Add(w.busy)
	return w.q.Submit(ctx, o)
}

// errRetry answers an op that goes back to the queue: its batch could not
// take the lock, and the op has not yet waited its busy_timeout.
var errRetry = errors.New("ledger: retry")

// close refuses new writes, waits for queued ones to commit, and closes the
// connection.
func (w *writer) close() {
	w.q.Close()
	for _, st := range w.stmts {
		st.Close()
	}
	w.conn.Close()
}

func (w *writer) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := w.stmts[q]; ok {
		return st, nil
	}
	st, err := w.conn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	w.stmts[q] = st
	return st, nil
}

// stmtConn runs queries through the writer's prepared statements.
type stmtConn struct {
	w   *writer
	ctx context.Context
}

func (c stmtConn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := c.w.stmt(ctx, q)
	if err != nil {
		return c.w.conn.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

func (c stmtConn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := c.w.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (c stmtConn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := c.w.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// batch is one transaction's worth of writes.
type batch struct {
	w      *writer
	ctx    context.Context
	q      stmtConn
	view   *view
	minute map[int64]Totals
	hour   map[int64]Totals
	dims   map[dimKey]delta
	// open changes to apply after commit
	opened map[string]openRow
	closed []string
	// settled are the rows settled by this batch, for Store.OnSettle.
	settled []Settled
	// setAside counts the rows fold set aside (see setAsideRows).
	setAside int64
}

type dimKey struct {
	hour int64
	dims
}

const writeTimeout = 30 * time.Second

func (w *writer) run(ops []*op) {
	// A reservation whose request has ended is not written.
	if ops = w.q.Live(ops); len(ops) == 0 {
		return
	}
	errs := w.runBatch(ops)
	if errs == nil {
		// The batch failed as a whole: retry each write alone, so that
		// one bad write cannot fail the others.
		if len(ops) == 1 {
			return
		}
		for _, o := range ops {
			w.run([]*op{o})
		}
		return
	}
	var again []*op
	for i, o := range ops {
		if errs[i] == errRetry {
			again = append(again, o)
			continue
		}
		o.Done <- errs[i]
	}
	if len(again) > 0 {
		w.q.Requeue(again)
	}
}

// begin starts the batch's transaction. It waits for another connection's
// lock no longer than the op of the batch with the least time left (its
// busy_timeout since it was submitted, or its request's deadline), and not
// at all once every op's request has ended. When the lock stays held, the
// ops with time left are retried (errRetry) and the others fail: no write
// waits busy_timeout twice because it was queued behind a batch that
// waited.
func (w *writer) begin(q stmtConn, ops []*op) []error {
	now := time.Now()
	wait := w.busy
	for _, o := range ops {
		wait = min(wait, o.deadline.Sub(now))
		if o.Ctx != nil {
			if d, ok := o.Ctx.Deadline(); ok {
				wait = min(wait, d.Sub(now))
			}
		}
	}
	// Rounded down (a write may wait a little less than its due, never
	// more), coarsely above a second, so that the pragma is rarely reset.
	if wait = max(wait, 0); wait >= time.Second {
		wait = wait.Truncate(100 * time.Millisecond)
	} else {
		wait = wait.Truncate(time.Millisecond)
	}
	if wait != w.curBusy {
		if _, err := w.conn.ExecContext(context.Background(), fmt.Sprintf("PRAGMA busy_timeout = %d", wait.Milliseconds())); err != nil {
			return errsOf(ops, unavailable(err))
		}
		w.curBusy = wait
	}
	ctx, stop := beginContext(ops)
	_, err := q.ExecContext(ctx, "BEGIN IMMEDIATE")
	stop()
	if err == nil {
		return nil
	}
	errs := make([]error, len(ops))
	now = time.Now()
	for i, o := range ops {
		switch {
		case o.Ctx != nil && o.Ctx.Err() != nil:
			errs[i] = gaveUp(o.Ctx.Err())
		case isBusy(err) && now.Before(o.deadline):
			errs[i] = errRetry
		default:
			errs[i] = unavailable(err)
		}
	}
	return errs
}

// beginContext is done once every op of a batch has given up (its
// request ended), so that a lock wait is not kept for no one; it is never
// done while any op must be recorded.
func beginContext(ops []*op) (context.Context, func()) {
	for _, o := range ops {
		if o.Ctx == nil {
			return context.Background(), func() {}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int64
	left.Store(int64(len(ops)))
	stops := make([]func() bool, len(ops))
	for i, o := range ops {
		stops[i] = context.AfterFunc(o.Ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}

func errsOf(ops []*op, err error) []error {
	errs := make([]error, len(ops))
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// isBusy reports SQLITE_BUSY: another connection holds the lock.
func isBusy(err error) bool {
	var coder interface{ Code() int }
	return errors.As(err, &coder) && coder.Code()&0xff == 5
}

// runBatch commits ops in one transaction and returns each op's result
// (every op's ErrUnavailable when the transaction could not begin), or nil
// when the transaction failed after it began (then ops of a one-op batch
// have already been answered).
func (w *writer) runBatch(ops []*op) []error {
	// A context that cannot be cancelled: the driver then needs no
	// watcher per statement, and no write is ever interrupted halfway (an
	// interrupted statement rolls the whole batch back). Lock waits are
	// bounded by busy_timeout.
	ctx := context.Background()
	began := time.Now()
	fail := func(err error) []error {
		if len(ops) == 1 {
			ops[0].Done <- unavailable(err)
		}
		return nil
	}
	// failAll answers every op when the database itself is unavailable (the
	// lock is still held by another connection after busy_timeout, or it
	// cannot be read): retrying each write alone would make the last of n
	// queued writes wait n busy timeouts (issue 8, case 10).
	failAll := func(err error) []error { return errsOf(ops, unavailable(err)) }
	q := stmtConn{w: w, ctx: ctx}
	if errs := w.begin(q, ops); errs != nil {
		return errs
	}
	rollback := func() {
		// The cache holds deltas of writes that are now undone, and the
		// rollups' frontiers may have been moved by this batch.
		w.windows.reset()
		w.hourUntil, w.foldUntil = -1, -1
		_, _ = q.ExecContext(ctx, "ROLLBACK")
	}
	// The batch's maps are the writer's, emptied after each batch: only the
	// leader uses them, and reusing them saves their allocation per batch.
	b := &w.batch
	*b = batch{w: w, ctx: ctx, q: q, minute: b.minute, hour: b.hour, dims: b.dims, opened: b.opened, closed: b.closed[:0], settled: b.settled[:0]}
	if b.minute == nil {
		b.minute, b.hour, b.dims, b.opened = map[int64]Totals{}, map[int64]Totals{}, map[dimKey]delta{}, map[string]openRow{}
	}
	defer func() {
		clear(b.minute)
		clear(b.hour)
		clear(b.dims)
		clear(b.opened)
		b.view = nil
	}()
	if err := w.sync(ctx, b.q, needsRefresh(ops)); err != nil {
		rollback()
		return failAll(err)
	}
	now := w.s.clk.Now()
	if now.UnixMilli() < w.lastNow.UnixMilli() {
		// The clock went back: windows would have to move back in time.
		w.windows.reset()
	}
	w.lastNow = now
	if err := b.fold(now); err != nil {
		rollback()
		return failAll(err)
	}
	if err := b.rollHours(now); err != nil {
		rollback()
		return failAll(err)
	}
	b.view = &view{ctx: ctx, q: b.q, now: now, budgets: w.budgets, flush: b.flush, wc: &w.windows, hourUntil: w.hourUntil, foldUntil: w.foldUntil, prunedUntil: w.prunedUntil, open: b.inFlight}
	errs := make([]error, len(ops))
	for i, o := range ops {
		err := b.apply(o)
		var dbe *dbError
		if errors.As(err, &dbe) {
			rollback()
			return fail(dbe.err)
		}
		errs[i] = err
	}
	if err := b.flush(); err != nil {
		rollback()
		return fail(err)
	}
	if _, err := q.ExecContext(ctx, "COMMIT"); err != nil {
		rollback()
		return fail(err)
	}
	if w.onCommit != nil {
		w.onCommit(len(ops), time.Since(began))
	}
	if fn := w.s.onSettle.Load(); fn != nil {
		for _, x := range b.settled {
			(*fn)(x)
		}
	}
	if b.setAside > 0 {
		w.s.log.Warn("ledger: usage rows with unreadable usage set aside; each counts as one request of unknown usage (see rotor ledger report)",
			"rows", b.setAside)
	}
	for id, r := range b.opened {
		w.open[id] = r
	}
	for _, id := range b.closed {
		delete(w.open, id)
	}
	return errs
}

// needsRefresh reports whether a batch admits anything.
func needsRefresh(ops []*op) bool {
	for _, o := range ops {
		if o.kind == opReserve {
			return true
		}
	}
	return false
}

func unavailable(err error) error {
	if isBusy(err) {
		// Say which setting waited: the driver's "database is locked"
		// names none.
		return fmt.Errorf("%w: another process held the write lock past ledger.busy_timeout: %v", ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}

// sync looks, at the start of every batch, for commits by other
// connections (PRAGMA data_version moves only for those): their rows are
// not in the cached windows, and they may have moved the rollups'
// frontiers, which every write must know exactly (see addTotals). A batch
// that admits also reloads budgets, tokens and prices when config_version says
// they changed.
func (w *writer) sync(ctx context.Context, q stmtConn, admits bool) error {
	var dv int64
	if err := q.QueryRowContext(ctx, "PRAGMA data_version").Scan(&dv); err != nil {
		return err
	}
	if dv != w.dataVer || w.foldUntil < 0 {
		w.windows.reset()
		w.dataVer = dv
		w.hourUntil = -1 // rollHours reads it
		if err := q.QueryRowContext(ctx, qFoldUntil).Scan(&w.foldUntil); err != nil {
			return fmt.Errorf("fold frontier: %w", err)
		}
		if err := q.QueryRowContext(ctx, qPrunedUntil).Scan(&w.prunedUntil); err != nil {
			return fmt.Errorf("prune frontier: %w", err)
		}
		w.cfgStale = true
	}
	if !admits || (!w.cfgStale && w.cfgVer >= 0) {
		return nil
	}
	w.cfgStale = false
	var cv int64
	if err := q.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = 'config_version'").Scan(&cv); err != nil {
		return err
	}
	if cv == w.cfgVer {
		return nil
	}
	bs, err := listBudgets(ctx, w.conn)
	if err != nil {
		return err
	}
	toks, err := loadTokens(ctx, w.conn)
	if err != nil {
		return err
	}
	prices, err := listPrices(ctx, w.conn)
	if err != nil {
		return err
	}
	w.budgets, w.tokens, w.prices, w.cfgVer = bs, toks, prices, cv
	w.s.tokens.Store(&toks)
	return nil
}
