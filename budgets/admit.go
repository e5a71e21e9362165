package budgets

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rotorhq/rotor/ledger"
)

// OperationDecisions is the ledger operation of the Decisions route.
const OperationDecisions = ledger.OperationDecisions

// ExceededError is a used-up budget (429).
type ExceededError struct {
	Status
	// RetryAfter is how long until the budget frees.
	RetryAfter time.Duration
}

func (e *ExceededError) Error() string {
	return fmt.Sprintf("budget %s: %s of %s %s used in the %s window; frees at %s",
		e.Name, e.FormatUsed(), e.FormatLimit(), e.Kind, e.Window.Describe(), FormatUntil(e.FreesAt))
}

// Unwrap returns ErrExceeded.
func (e *ExceededError) Unwrap() error { return ErrExceeded }

// PolicyBlockedError is a refusal by cost budgets (403): a Decisions
// request, whose cost is unknown, while a cost budget exists; a request
// for a model without a price while a cost budget exists; or a cost budget
// that fails closed on usage of unknown cost in its window.
type PolicyBlockedError struct {
	// Budgets are the cost budgets responsible.
	Budgets []Status
	// Operation and Model are the refused request's.
	Operation, Model string
	// Unpriced: Model has no price.
	Unpriced bool
	// Unreadable names stored budgets this rotor cannot read (a window
	// or kind of a newer rotor on a shared ledger): they refuse every
	// request, since what they allow is unknown.
	Unreadable []string
}

func (e *PolicyBlockedError) Error() string {
	var parts []string
	for _, s := range e.Budgets {
		p := s.Name
		if s.State == StateFailClosed {
			p += fmt.Sprintf(" (fail-closed: usage of unknown cost in its window until %s)", FormatUntil(s.FreesAt))
		}
		parts = append(parts, p)
	}
	names := strings.Join(parts, ", ")
	switch {
	case len(e.Unreadable) > 0:
		return "budgets this rotor cannot read (written by a newer rotor?) refuse every request until rotor is upgraded or they are removed with `rotor budget remove NAME`: " +
			strings.Join(e.Unreadable, ", ")
	case e.Operation == OperationDecisions:
		return "Decisions requests are refused while a cost budget exists, because their cost is unknown; budget on --requests or --tokens instead. Cost budgets: " + names
	case e.Unpriced:
		return fmt.Sprintf("model %q has no price, so its cost would be unknown, and cost budgets exist; give it one with `rotor pricing set %s --input USD --output USD`. Cost budgets: %s", e.Model, e.Model, names)
	}
	return "cost budgets fail closed while their window holds usage of unknown cost; resolve a row with `rotor ledger settle`, or wait until it leaves the window. Cost budgets: " + names
}

// Unwrap returns ErrPolicyBlocked.
func (e *PolicyBlockedError) Unwrap() error { return ErrPolicyBlocked }

// Admitter admits reservations against every budget in the ledger. It
// implements ledger.Admitter and runs inside the ledger's write
// transaction.
type Admitter struct {
	mu    sync.Mutex
	cache map[ledger.BudgetRecord]Budget
}

// NewAdmitter returns an Admitter.
func NewAdmitter() *Admitter { return &Admitter{cache: map[ledger.BudgetRecord]Budget{}} }

var _ ledger.Admitter = (*Admitter)(nil)

// budgets reads the stored records, and names those this binary cannot
// read (cached as a Budget of no kind).
func (a *Admitter) budgets(rs []ledger.BudgetRecord) (out []Budget, unreadable []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out = make([]Budget, 0, len(rs))
	for _, r := range rs {
		b, ok := a.cache[r]
		if !ok {
			var err error
			if b, err = FromRecord(r); err != nil {
				b = Budget{Name: r.Name}
			}
			if len(a.cache) > 1024 {
				clear(a.cache)
			}
			a.cache[r] = b
		}
		if b.Kind == "" {
			unreadable = append(unreadable, r.Name)
			continue
		}
		out = append(out, b)
	}
	return out, unreadable
}

// Admit refuses the reservation with a *PolicyBlockedError while a stored
// budget cannot be read, while a cost budget exists for a Decisions
// request or a request whose model has no price (its cost would be
// unknown), or while a cost budget fails closed; and with an
// *ExceededError when a budget is used up.
func (a *Admitter) Admit(r ledger.WindowReader, res ledger.Reservation) error {
	bs, unreadable := a.budgets(r.Budgets())
	if len(unreadable) > 0 {
		// What such a budget allows is unknown: fail closed, naming it
		// (budget list skips it with a warning).
		return &PolicyBlockedError{Operation: res.Operation, Model: res.Model, Unreadable: unreadable}
	}
	var costs []Budget
	for _, b := range bs {
		if b.Kind == KindCost {
			costs = append(costs, b)
		}
	}
	if len(costs) > 0 && (res.Operation == OperationDecisions || !res.Priced) {
		pe := &PolicyBlockedError{Operation: res.Operation, Model: res.Model, Unpriced: res.Operation != OperationDecisions}
		for _, b := range costs {
			st, err := Evaluate(r, b)
			if err != nil {
				return err
			}
			pe.Budgets = append(pe.Budgets, st)
		}
		return pe
	}
	var worst *ExceededError
	var closed *PolicyBlockedError
	for _, b := range bs {
		st, err := Evaluate(r, b)
		if err != nil {
			return err
		}
		switch st.State {
		case StateOK:
			continue
		case StateFailClosed:
			if closed == nil {
				closed = &PolicyBlockedError{Operation: res.Operation, Model: res.Model}
			}
			closed.Budgets = append(closed.Budgets, st)
			continue
		}
		e := &ExceededError{Status: st, RetryAfter: st.FreesAt.Sub(st.Now)}
		if worst == nil || e.RetryAfter > worst.RetryAfter {
			worst = e
		}
	}
	if closed != nil {
		return closed
	}
	if worst != nil {
		return worst
	}
	return nil
}
