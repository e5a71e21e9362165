package pricefile

import (
	"math/big"
	"testing"
)

// Micros takes a price up to MaxMicros and refuses one above it (the
// ledger refuses it, and with it the whole import).
func TestMicrosRefusesAboveMaxMicros(t *testing.T) {
	if n, ok := Micros(big.NewRat(1, 1), MaxMicros); !ok || n != MaxMicros {
		t.Errorf("Micros(MaxMicros) = %d, %v; want %d, true", n, ok, int64(MaxMicros))
	}
	if n, ok := Micros(big.NewRat(1, 1), MaxMicros+1); ok {
		t.Errorf("Micros(MaxMicros+1) = %d, true; want refused", n)
	}
}

// A model with only one of its prices nonzero is priced: an embedding
// model's output costs nothing, and skipping it left it unpriced (refused
// under a cost budget).
func TestParseLiteLLMKeepsAModelWithOneZeroPrice(t *testing.T) {
	prices, skipped, err := ParseLiteLLM([]byte(`{"embed":{"input_cost_per_token":1e-07,"output_cost_per_token":0},"free":{"input_cost_per_token":0,"output_cost_per_token":0}}`), "")
	if err != nil || skipped != 1 || len(prices) != 1 || prices[0].Model != "embed" || prices[0].InputMicros != 100_000 || prices[0].OutputMicros != 0 {
		t.Errorf("ParseLiteLLM = %+v, %d skipped, %v; want embed priced and free skipped", prices, skipped, err)
	}
}
