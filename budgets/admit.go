package budgets

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rotorhq/rotor/ledger"
)

// OperationDecisions is the ledger operation of the Decisions route.
const OperationDecisions = "decisions"

// ExceededError is a used-up requests or tokens budget.
type ExceededError struct {
	Status
	// RetryAfter is how long until the budget frees.
	RetryAfter time.Duration
}

func (e *ExceededError) Error() string {
	return fmt.Sprintf("budget %s: %s of %s %s used in the %s window; frees at %s",
		e.Name, e.FormatUsed(), e.FormatLimit(), e.Kind, e.Window.Describe(), e.FreesAt.UTC().Format(time.RFC3339))
}

// Unwrap returns ErrExceeded.
func (e *ExceededError) Unwrap() error { return ErrExceeded }

// PolicyBlockedError is a refusal by cost budgets: Decisions cost is
// unknown, so it cannot be admitted while a cost budget exists.
type PolicyBlockedError struct {
	// Budgets are the cost budgets responsible.
	Budgets []Status
}

func (e *PolicyBlockedError) Error() string {
	var parts []string
	for _, s := range e.Budgets {
		p := s.Name
		if s.State == StateFailClosed {
			p += fmt.Sprintf(" (fail-closed: usage of unknown cost in its window until %s)", s.FreesAt.UTC().Format(time.RFC3339))
		}
		parts = append(parts, p)
	}
	return "Decisions requests are refused while a cost budget exists, because their cost is unknown; budget on --requests or --tokens instead. Cost budgets: " + strings.Join(parts, ", ")
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

func (a *Admitter) budgets(rs []ledger.BudgetRecord) []Budget {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Budget, 0, len(rs))
	for _, r := range rs {
		b, ok := a.cache[r]
		if !ok {
			var err error
			if b, err = FromRecord(r); err != nil {
				// A record this binary cannot read: fail closed on it
				// as an exhausted requests budget would be wrong; treat
				// it as a policy block naming it.
				b = Budget{Name: r.Name, Kind: KindCost, Limit: 1, Window: Window{Calendar: CalendarHour}}
			}
			if len(a.cache) > 1024 {
				clear(a.cache)
			}
			a.cache[r] = b
		}
		out = append(out, b)
	}
	return out
}

// Admit refuses the reservation with a *PolicyBlockedError when a cost
// budget exists (Decisions cost is unknown, so any cost budget would fail
// closed), or with an *ExceededError when a requests or tokens budget is
// used up.
func (a *Admitter) Admit(r ledger.WindowReader, res ledger.Reservation) error {
	bs := a.budgets(r.Budgets())
	var costs []Budget
	for _, b := range bs {
		if b.Kind == KindCost {
			costs = append(costs, b)
		}
	}
	if len(costs) > 0 {
		pe := &PolicyBlockedError{}
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
	for _, b := range bs {
		st, err := Evaluate(r, b)
		if err != nil {
			return err
		}
		if st.State == StateOK {
			continue
		}
		e := &ExceededError{Status: st, RetryAfter: st.FreesAt.Sub(st.Now)}
		if worst == nil || e.RetryAfter > worst.RetryAfter {
			worst = e
		}
	}
	if worst != nil {
		return worst
	}
	return nil
}
