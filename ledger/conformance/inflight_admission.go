package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
)

// Admission, not only `budget list`, takes an open reservation older than
// ledger.MaxInFlight for usage of unknown cost, whatever its deadline: the
// handle that wrote it (which counts its own requests in flight from
// memory) refuses like any other handle once it is 1 ms past MaxInFlight.
func testMaxInFlightAtAdmission(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	addBudget(t, l, budgets.Budget{Name: "usd", Kind: budgets.KindCost, Limit: 1_000_000, Window: rolling(7 * 24 * time.Hour)})
	a := budgets.NewAdmitter()
	if err := l.Reserve(ctx, ledger.Reservation{RequestID: "long", Operation: opChat, Model: "gpt", Expires: t0.Add(3 * ledger.MaxInFlight)}, a); err != nil {
		t.Fatal(err)
	}
	other := d.open()
	d.clk.Set(t0.Add(ledger.MaxInFlight))
	if st := status(t, l, "usd"); st.State != budgets.StateOK {
		t.Fatalf("at MaxInFlight: %s, want ok (in flight)", st.State)
	}
	d.clk.Advance(time.Millisecond)
	// Its own handle first: every open reservation in the window is its
	// own, so its count from memory alone decides.
	for _, name := range []string{"its own handle", "another handle"} {
		h := map[string]ledger.Ledger{"its own handle": l, "another handle": other}[name]
		err := d.admit(h, a, "past-"+name, opChat, "gpt")
		var pe *budgets.PolicyBlockedError
		if !errors.As(err, &pe) || len(pe.Budgets) != 1 || pe.Budgets[0].State != budgets.StateFailClosed {
			t.Errorf("%s: 1 ms past MaxInFlight: %v, want the cost budget failing closed", name, err)
		}
	}
}
