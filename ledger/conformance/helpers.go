package conformance

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
)

// Operations the suite writes: a priced route and Decisions.
const (
	opChat      = "chat.completions"
	opDecisions = ledger.OperationDecisions
)

// gpt costs 1 micro-USD per input token and 2 per output token, so a
// row's cost is input + 2 x output.
var gptPrice = ledger.Price{Model: "gpt", InputMicros: 1_000_000, OutputMicros: 2_000_000, Source: ledger.SourceSet}

func setPrice(t *testing.T, l ledger.Ledger, p ledger.Price) {
	t.Helper()
	if _, err := l.PutPrices(ctx, []ledger.Price{p}, false); err != nil {
		t.Fatalf("PutPrices(%s): %v", p.Model, err)
	}
}

// reserveAt writes a reservation for op and model, expiring an hour from
// the clock's now, with no admitter.
func (d *db) reserve(l ledger.Ledger, id, op, model string) {
	d.t.Helper()
	r := ledger.Reservation{RequestID: id, Operation: op, Pool: "api", Model: model, Region: "eu", Client: "ci", Expires: d.clk.Now().Add(time.Hour)}
	if err := l.Reserve(ctx, r, nil); err != nil {
		d.t.Fatalf("Reserve(%s): %v", id, err)
	}
}

// usage is a settlement with input and output tokens known.
func usage(id, model string, in, out int64) ledger.Settlement {
	return ledger.Settlement{RequestID: id, Model: model, Credential: "key-a", Attempts: 1, Status: 200,
		InputTokens: ledger.Known(in), OutputTokens: ledger.Known(out), TotalTokens: ledger.Known(in + out)}
}

func settle(t *testing.T, l ledger.Ledger, st ledger.Settlement) {
	t.Helper()
	if err := l.Settle(ctx, st); err != nil {
		t.Fatalf("Settle(%s): %v", st.RequestID, err)
	}
}

// rowsOf reads every row within a year of t0.
func rowsOf(t *testing.T, l ledger.Ledger) []ledger.Row {
	t.Helper()
	rows, err := l.Rows(ctx, t0.Add(-365*24*time.Hour), t0.Add(365*24*time.Hour), 0)
	if err != nil {
		t.Fatalf("Rows: %v", err)
	}
	return rows
}

func rowByID(t *testing.T, l ledger.Ledger) map[string]ledger.Row {
	t.Helper()
	m := map[string]ledger.Row{}
	for _, r := range rowsOf(t, l) {
		m[r.RequestID] = r
	}
	return m
}

func ids(rows []ledger.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.RequestID
	}
	return out
}

// addBudget stores b through l.
func addBudget(t *testing.T, l ledger.Ledger, b budgets.Budget) {
	t.Helper()
	if err := b.Validate(); err != nil {
		t.Fatalf("budget %s: %v", b.Name, err)
	}
	if err := l.PutBudget(ctx, b.Record(), false); err != nil {
		t.Fatalf("PutBudget(%s): %v", b.Name, err)
	}
}

func rolling(d time.Duration) budgets.Window { return budgets.Window{Rolling: d} }
func calendar(c string) budgets.Window       { return budgets.Window{Calendar: c} }

// statuses evaluates every stored budget in one view of l, by name.
func statuses(t *testing.T, l ledger.Ledger) map[string]budgets.Status {
	t.Helper()
	sts, skipped, err := budgets.List(ctx, l)
	if err != nil || skipped != nil {
		t.Fatalf("budgets.List: %v (skipped %v)", err, skipped)
	}
	m := map[string]budgets.Status{}
	for _, s := range sts {
		m[s.Name] = s
	}
	return m
}

func status(t *testing.T, l ledger.Ledger, name string) budgets.Status {
	t.Helper()
	s, ok := statuses(t, l)[name]
	if !ok {
		t.Fatalf("no budget %s", name)
	}
	return s
}

// totals reads the totals of w in one view of l.
func totals(t *testing.T, l ledger.Ledger, w ledger.Window) ledger.Totals {
	t.Helper()
	var got ledger.Totals
	if err := l.View(ctx, func(r ledger.WindowReader) error {
		var err error
		got, err = r.Totals(w)
		return err
	}); err != nil {
		t.Fatalf("View: %v", err)
	}
	return got
}

// admitReq reserves a request through the budgets' admitter.
func (d *db) admit(l ledger.Ledger, a *budgets.Admitter, id, op, model string) error {
	return l.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: op, Pool: "api", Model: model, Client: "ci", Expires: d.clk.Now().Add(time.Hour)}, a)
}

// admitFunc adapts a function to ledger.Admitter.
type admitFunc func(r ledger.WindowReader, res ledger.Reservation) error

func (f admitFunc) Admit(r ledger.WindowReader, res ledger.Reservation) error { return f(r, res) }

// sortedKeys returns m's keys in order, for stable messages.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func describeRow(r ledger.Row) string {
	return fmt.Sprintf("%s@%s settled=%v in=%v out=%v total=%v cost=%v", r.RequestID, r.Time.Format(time.RFC3339Nano), r.Settled,
		r.InputTokens, r.OutputTokens, r.TotalTokens, r.CostMicros)
}

// unwrap returns the engine's own handle under the suite's wrapper.
func unwrap(l ledger.Ledger) ledger.Ledger {
	if c, ok := l.(*closeOnce); ok {
		return c.Ledger
	}
	return l
}

// capability is l's optional interface T (ledger.Pruner, ledger.Importer,
// OnSettle), which every engine must have: a handle without it fails the
// test, naming T.
func capability[T any](t *testing.T, l ledger.Ledger) T {
	t.Helper()
	l = unwrap(l)
	x, ok := l.(T)
	if !ok {
		var zero *T
		t.Fatalf("%T does not implement %T: every engine must (prune, ledger copy and the token and cost metrics use it)", l, zero)
	}
	return x
}
