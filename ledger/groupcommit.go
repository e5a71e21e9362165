package ledger

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// Queued is the part of a write that a GroupCommit handles: an engine's
// op embeds it.
type Queued struct {
	// Ctx, when not nil, is the request's: the write is given up while it
	// is still queued, or before its batch begins (Live), once Ctx ends.
	// Writes that must be recorded (settlements) have none.
	Ctx context.Context
	// Done receives the write's result, once.
	Done chan error
}

func (q *Queued) queued() *Queued { return q }

// QueuedOp is an engine's op: a struct that embeds Queued.
type QueuedOp interface{ queued() *Queued }

// GroupCommit is the leader/follower group commit of both engines: a
// write joins the queue, and if no batch is running its caller becomes the
// leader and commits everything queued (Run), batch after batch, until the
// queue is empty; the others wait for their own batch. A lone writer thus
// commits on its own goroutine with no handoff, and concurrent writers
// share commits. Run answers each op of its batch on its Done.
type GroupCommit[O QueuedOp] struct {
	// MaxBatch bounds the ops of one batch.
	MaxBatch int
	// InFlight, called by the leader with the queue's lock held, reports
	// whether writes other than the queued ones are on their way (more
	// than one open reservation): the leader then yields before it takes
	// a batch.
	InFlight func() bool
	// Run commits a batch and answers each op; it runs on the leader's
	// goroutine, without the queue's lock, one batch at a time.
	Run func(batch []O)

	mu      sync.Mutex
	idle    *sync.Cond // signalled when a leader steps down
	closed  bool
	leading bool
	queue   []O
}

// Submit queues o and returns its result once its batch has answered it.
// ctx (nil for writes that must be recorded) gives the write up while it
// has not begun: a cancelled request never interrupts a batch.
func (g *GroupCommit[O]) Submit(ctx context.Context, o O) error {
	q := o.queued()
	if ctx != nil && ctx.Done() != nil {
		if err := ctx.Err(); err != nil {
			return gaveUp(err)
		}
		q.Ctx = ctx
	}
	q.Done = make(chan error, 1)
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	g.queue = append(g.queue, o)
	if g.leading {
		g.mu.Unlock()
		return g.wait(q)
	}
	g.lead()
	g.mu.Unlock()
	return <-q.Done
}

// wait waits for the result of q, queued behind another leader's batch.
// An op whose context ends while it is still queued leaves the queue; one
// already in a batch has its result.
func (g *GroupCommit[O]) wait(q *Queued) error {
	if q.Ctx == nil {
		return <-q.Done
	}
	select {
	case err := <-q.Done:
		return err
	case <-q.Ctx.Done():
	}
	g.mu.Lock()
	for i, o := range g.queue {
		if o.queued() == q {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			g.mu.Unlock()
			return gaveUp(q.Ctx.Err())
		}
	}
	g.mu.Unlock()
	return <-q.Done
}

// gaveUp is the error of a reservation whose request ended before it
// could be written: the request's deadline, or its caller gone.
func gaveUp(err error) error {
	return fmt.Errorf("ledger: reservation not written: %w", err)
}

// Live answers the ops of a batch whose request has ended (they are not
// written) and returns the others.
func (g *GroupCommit[O]) Live(ops []O) []O {
	for i, o := range ops {
		if q := o.queued(); q.Ctx != nil && q.Ctx.Err() != nil {
			live := append([]O(nil), ops[:i]...)
			for _, o := range ops[i:] {
				if q := o.queued(); q.Ctx != nil && q.Ctx.Err() != nil {
					q.Done <- gaveUp(q.Ctx.Err())
				} else {
					live = append(live, o)
				}
			}
			return live
		}
	}
	return ops
}

// Requeue puts ops back at the head of the queue, for the next batch (a
// batch that could not take the database's lock in time for them).
func (g *GroupCommit[O]) Requeue(ops []O) {
	g.mu.Lock()
	g.queue = append(ops, g.queue...)
	g.mu.Unlock()
}

// Len reports how many writes are queued behind the running batch: tests
// wait on it to put writes in one batch (the conformance suite's
// Engine.Queued), without a sleep.
func (g *GroupCommit[O]) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// lead commits the queue until it is empty. It is called, and returns,
// with g.mu held; it releases the lock while a batch runs, so that more
// writes queue up for the next batch.
func (g *GroupCommit[O]) lead() {
	g.leading = true
	for len(g.queue) > 0 {
		if len(g.queue) < g.MaxBatch && (len(g.queue) > 1 || g.InFlight()) {
			// Other requests are in flight: let the goroutines that are
			// ready to run reach their writes first, so that the batch
			// takes many of them at once, one commit for all (README,
			// Performance). A lone request does not yield: the yield wakes
			// another thread, which costs more than it could gather.
			g.mu.Unlock()
			runtime.Gosched()
			g.mu.Lock()
		}
		n := min(len(g.queue), g.MaxBatch)
		batch := make([]O, n)
		copy(batch, g.queue)
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.mu.Unlock()
		g.Run(batch)
		g.mu.Lock()
	}
	g.leading = false
	if g.idle != nil {
		g.idle.Broadcast()
	}
}

// Close refuses new writes and returns once the queued ones are answered.
func (g *GroupCommit[O]) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	if g.idle == nil {
		g.idle = sync.NewCond(&g.mu)
	}
	for g.leading {
		g.idle.Wait()
	}
	if len(g.queue) > 0 {
		g.lead()
	}
}
