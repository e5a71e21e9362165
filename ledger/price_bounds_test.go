package ledger_test

import (
	"testing"

	"github.com/rotorhq/rotor/ledger"
)

// A price is stored only within 0..MaxPriceMicros per field: a negative
// price would make a row's cost negative (and lower a cost budget's used
// sum), and the bound itself is a valid price.
func TestPriceValidateBounds(t *testing.T) {
	for _, tt := range []struct {
		p  ledger.Price
		ok bool
	}{
		{ledger.Price{Model: "m", InputMicros: ledger.MaxPriceMicros, OutputMicros: ledger.MaxPriceMicros, CachedInputMicros: ledger.Known(ledger.MaxPriceMicros)}, true},
		{ledger.Price{Model: "m"}, true},
		{ledger.Price{Model: "m", InputMicros: -1}, false},
		{ledger.Price{Model: "m", OutputMicros: -1}, false},
		{ledger.Price{Model: "m", CachedInputMicros: ledger.Known(-1)}, false},
		{ledger.Price{Model: "m", OutputMicros: ledger.MaxPriceMicros + 1}, false},
		{ledger.Price{Model: "", InputMicros: 1}, false},
	} {
		if err := tt.p.Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tt.p, err, tt.ok)
		}
	}
}
