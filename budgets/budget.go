package budgets

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rotorhq/rotor/internal/names"
	"github.com/rotorhq/rotor/ledger"
)

// Kind is what a budget limits.
type Kind string

const (
	KindRequests Kind = "requests"
	KindTokens   Kind = "tokens"
	KindCost     Kind = "cost"
)

// Budget is a limit over a window.
type Budget struct {
	Name string
	Kind Kind
	// Limit is a count of requests or tokens, or micro-USD for cost.
	Limit     int64
	Window    Window
	CreatedAt time.Time
}

// Errors.
var (
	// ErrExceeded is a used-up requests or tokens budget (429).
	ErrExceeded = errors.New("budget exceeded")
	// ErrPolicyBlocked is a refusal because cost budgets exist or fail
	// closed (403).
	ErrPolicyBlocked = errors.New("blocked by budget policy")
	// ErrInvalid is bad budget input.
	ErrInvalid = errors.New("invalid budget")
)

// ValidateName checks a budget name.
func ValidateName(name string) error {
	if !names.Valid(name) {
		return fmt.Errorf("%w: name %q: use "+names.Rule, ErrInvalid, name)
	}
	return nil
}

// DefaultName is the readable name a budget gets when none is given:
// "requests-24h", "tokens-day", "cost-month".
func DefaultName(k Kind, w Window) string {
	return string(k) + "-" + w.String()
}

// ParseCost reads a USD amount with at most 6 decimals into micro-USD.
func ParseCost(s string) (int64, error) {
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "$"))
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" || !allDigits(whole) || !allDigits(frac) {
		// Digits only: ParseInt would take a sign in either part
		// ("1.-5" read as 0.95).
		return 0, fmt.Errorf("%w: cost %q: want a positive USD amount such as 5 or 0.25", ErrInvalid, s)
	}
	if len(frac) > 6 {
		return 0, fmt.Errorf("%w: cost %q: at most 6 decimals (micro-USD)", ErrInvalid, s)
	}
	if whole == "" {
		whole = "0"
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/1_000_000-1 {
		return 0, fmt.Errorf("%w: cost %q: too large (at most %d USD)", ErrInvalid, s, math.MaxInt64/1_000_000-1)
	}
	f := int64(0)
	if frac != "" {
		f, err = strconv.ParseInt((frac + "000000")[:6], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: cost %q: not a USD amount", ErrInvalid, s)
		}
	}
	micros := w*1_000_000 + f
	if micros <= 0 {
		return 0, fmt.Errorf("%w: cost %q: must be more than 0", ErrInvalid, s)
	}
	return micros, nil
}

// allDigits reports whether s holds ASCII digits only ("" does).
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FormatUntil prints the time something frees or ends (a budget, a
// cooldown) as RFC 3339 UTC to the second, rounded up: a script that waits
// until the printed time is never early (a window that frees at
// 19:35:15.994 prints 19:35:16, not 19:35:15).
func FormatUntil(t time.Time) string {
	if r := t.Truncate(time.Second); r.Before(t) {
		t = r.Add(time.Second)
	}
	return t.UTC().Format(time.RFC3339)
}

// FormatCost prints micro-USD as dollars with up to 6 decimals.
func FormatCost(micros int64) string {
	s := strconv.FormatInt(micros/1_000_000, 10)
	if f := micros % 1_000_000; f != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", f), "0")
	}
	return s
}

// FormatLimit prints a budget's limit in its unit.
func (b Budget) FormatLimit() string { return b.format(b.Limit) }

func (b Budget) format(v int64) string {
	if b.Kind == KindCost {
		return "$" + FormatCost(v)
	}
	return strconv.FormatInt(v, 10)
}

// Validate checks every field.
func (b Budget) Validate() error {
	if err := ValidateName(b.Name); err != nil {
		return err
	}
	switch b.Kind {
	case KindRequests, KindTokens, KindCost:
	default:
		return fmt.Errorf("%w: kind %q", ErrInvalid, b.Kind)
	}
	if b.Limit <= 0 {
		return fmt.Errorf("%w: limit must be more than 0", ErrInvalid)
	}
	if b.Window.Calendar == "" && b.Window.Rolling < MinRolling {
		return fmt.Errorf("%w: window must be at least %s", ErrInvalid, MinRolling)
	}
	return nil
}

// Record converts b for storage.
func (b Budget) Record() ledger.BudgetRecord {
	return ledger.BudgetRecord{Name: b.Name, Kind: string(b.Kind), Limit: b.Limit, Window: b.Window.String(), CreatedAt: b.CreatedAt}
}

// FromRecord reads a stored budget.
func FromRecord(r ledger.BudgetRecord) (Budget, error) {
	w, err := ParseWindow(r.Window)
	if err != nil {
		return Budget{}, fmt.Errorf("budget %q: %w", r.Name, err)
	}
	b := Budget{Name: r.Name, Kind: Kind(r.Kind), Limit: r.Limit, Window: w, CreatedAt: r.CreatedAt}
	return b, b.Validate()
}

// State is a budget's state.
type State string

const (
	StateOK         State = "ok"
	StateExhausted  State = "exhausted"
	StateFailClosed State = "fail-closed"
)

// Status is a budget evaluated at a moment.
type Status struct {
	Budget
	// Used is requests, known tokens, or known micro-USD in the window.
	Used int64
	// UnknownRows counts rows in the window whose measure is unknown
	// (tokens or cost).
	UnknownRows int64
	State       State
	// FreesAt is when the budget admits again; zero when it is ok.
	FreesAt time.Time
	// Now is the moment of evaluation.
	Now time.Time
}

// Remaining is what is left of the limit (never negative).
func (s Status) Remaining() int64 {
	if s.Used >= s.Limit {
		return 0
	}
	return s.Limit - s.Used
}

// FormatUsed prints the used amount in the budget's unit.
func (s Status) FormatUsed() string { return s.format(s.Used) }

// FormatRemaining prints the remaining amount in the budget's unit.
func (s Status) FormatRemaining() string { return s.format(s.Remaining()) }

// Evaluate computes b's status in the view r.
func Evaluate(r ledger.WindowReader, b Budget) (Status, error) {
	now := r.Now()
	w := b.Window.Range(now)
	t, err := r.Totals(w)
	if err != nil {
		return Status{}, err
	}
	st := Status{Budget: b, State: StateOK, Now: now}
	var m ledger.Measure
	switch b.Kind {
	case KindRequests:
		st.Used, m = t.Requests, ledger.MeasureRequests
	case KindTokens:
		st.Used, st.UnknownRows, m = t.Tokens, t.TokensUnknown, ledger.MeasureTokens
	case KindCost:
		st.Used, st.UnknownRows, m = t.CostMicros, t.CostUnknown, ledger.MeasureCost
		if t.CostUnknown > 0 {
			// A request in flight, within its deadline plus grace, is
			// not usage of unknown cost (DESIGN, Prices and cost).
			n, err := r.InFlight(w, t.CostUnknown)
			if err != nil {
				return Status{}, err
			}
			st.UnknownRows -= min(n, st.UnknownRows)
		}
	}
	if st.Used >= b.Limit {
		st.State = StateExhausted
		st.FreesAt = b.Window.End(now)
		if b.Window.Calendar == "" {
			at, ok, err := r.Reach(w, m, st.Used-b.Limit+1)
			if err != nil {
				return Status{}, err
			}
			if !ok { // cannot happen: the window holds Used
				at = now
			}
			st.FreesAt = b.Window.leaves(at, now)
		}
	}
	// Only cost budgets fail closed on unknown values (the spec); a tokens
	// budget skips rows of unknown tokens.
	if b.Kind == KindCost && st.UnknownRows > 0 {
		at, ok, err := r.NewestUnknownCost(w)
		if err != nil {
			return Status{}, err
		}
		if !ok {
			at = now
		}
		st.State = StateFailClosed
		if frees := b.Window.leaves(at, now); frees.After(st.FreesAt) {
			st.FreesAt = frees
		}
	}
	return st, nil
}

// Records converts stored records, skipping (and reporting) any that do not
// parse.
func Records(rs []ledger.BudgetRecord) ([]Budget, error) {
	var out []Budget
	var bad []error
	for _, r := range rs {
		b, err := FromRecord(r)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(bad...)
}

// Viewer opens one consistent view of the ledger (*ledger.Store does).
type Viewer interface {
	View(ctx context.Context, fn func(ledger.WindowReader) error) error
}

// List evaluates every stored budget in one view of the ledger. skipped
// reports the records that do not parse (they are left out); err is a
// ledger failure.
func List(ctx context.Context, v Viewer) (statuses []Status, skipped error, err error) {
	err = v.View(ctx, func(r ledger.WindowReader) error {
		var bs []Budget
		bs, skipped = Records(r.Budgets())
		for _, b := range bs {
			st, err := Evaluate(r, b)
			if err != nil {
				return err
			}
			if b.Kind == KindTokens && st.UnknownRows > 0 {
				// As for a cost budget (Evaluate), a request in flight is
				// not a row of unknown tokens. Listed only: admission
				// never reads a tokens budget's unknown rows, and spares
				// itself the query.
				n, err := r.InFlight(b.Window.Range(st.Now), st.UnknownRows)
				if err != nil {
					return err
				}
				st.UnknownRows -= min(n, st.UnknownRows)
			}
			statuses = append(statuses, st)
		}
		return nil
	})
	return statuses, skipped, err
}
