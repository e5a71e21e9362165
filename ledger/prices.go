package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/rotorhq/rotor/internal/pricefile"
)

// OperationDecisions is the Decisions route's operation: its rows always
// have unknown cost (the spec), and it takes no price.
const OperationDecisions = "decisions"

// SourceSet is the source of a price set by hand (`rotor pricing set`).
const SourceSet = "set"

// Price is a model's price, in micro-USD per 1M tokens.
type Price struct {
	// Model is the model as sent upstream (no prefix).
	Model        string
	InputMicros  int64
	OutputMicros int64
	// CachedInputMicros is unknown when cached input costs as input.
	CachedInputMicros Count
	// Source is SourceSet or the name of the imported file.
	Source  string
	Updated time.Time
}

// MaxPriceMicros bounds a price: $1,000,000 per 1M tokens. It is
// pricefile.MaxMicros, the bound `rotor pricing` reads prices under.
const MaxPriceMicros = pricefile.MaxMicros

// ValidatePrices returns the first price's error that Validate finds.
func ValidatePrices(ps []Price) error {
	for _, p := range ps {
		if err := p.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks a price's fields.
func (p Price) Validate() error {
	if p.Model == "" {
		return fmt.Errorf("price: model is empty")
	}
	for _, v := range []int64{p.InputMicros, p.OutputMicros, p.CachedInputMicros.V} {
		if v < 0 || v > MaxPriceMicros {
			return fmt.Errorf("price of %s: %d micro-USD per 1M tokens is outside 0..%d", p.Model, v, int64(MaxPriceMicros))
		}
	}
	return nil
}

var million = big.NewInt(1_000_000)

// costOf is a settled row's cost under price p: round half up of
// (uncached input x input price + cached input x cached price + output x
// output price) / 10^6, in micro-USD. Unknown input or output tokens,
// cached above input, or no price: unknown. Cached tokens the provider did
// not report count as none.
func CostOf(p *Price, input, cached, output Count) Count {
	if p == nil || !input.Known || !output.Known {
		return Count{}
	}
	c := int64(0)
	if cached.Known {
		c = cached.V
	}
	if c > input.V {
		return Count{}
	}
	cachedPrice := p.InputMicros
	if p.CachedInputMicros.Known {
		cachedPrice = p.CachedInputMicros.V
	}
	sum := new(big.Int).Mul(big.NewInt(input.V-c), big.NewInt(p.InputMicros))
	sum.Add(sum, new(big.Int).Mul(big.NewInt(c), big.NewInt(cachedPrice)))
	sum.Add(sum, new(big.Int).Mul(big.NewInt(output.V), big.NewInt(p.OutputMicros)))
	sum.Add(sum, big.NewInt(500_000)) // half up: every term is >= 0
	sum.Quo(sum, million)
	if !sum.IsInt64() || !Readable(sum.Int64()) {
		return Count{}
	}
	return Known(sum.Int64())
}

const selectPrices = `SELECT model, input_micros, cached_input_micros, output_micros, source, updated_ms FROM prices`

// scanPrice reads a row of selectPrices.
func scanPrice(scan func(dest ...any) error) (Price, error) {
	var p Price
	var cached *int64
	var ms int64
	if err := scan(&p.Model, &p.InputMicros, &cached, &p.OutputMicros, &p.Source, &ms); err != nil {
		return p, err
	}
	p.CachedInputMicros, p.Updated = CountOf(cached), time.UnixMilli(ms).UTC()
	return p, nil
}

func listPrices(ctx context.Context, q querier) (map[string]Price, error) {
	rows, err := q.QueryContext(ctx, selectPrices)
	if err != nil {
		return nil, fmt.Errorf("list prices: %w", err)
	}
	defer rows.Close()
	out := map[string]Price{}
	for rows.Next() {
		p, err := scanPrice(rows.Scan)
		if err != nil {
			return nil, fmt.Errorf("list prices: %w", err)
		}
		out[p.Model] = p
	}
	return out, rows.Err()
}

// priceOf reads one model's price.
func priceOf(ctx context.Context, q querier, model string) (Price, bool, error) {
	p, err := scanPrice(q.QueryRowContext(ctx, selectPrices+` WHERE model = ?`, model).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("price of %s: %w", model, err)
	}
	return p, true, nil
}

// Prices lists the stored prices by model.
func (s *Store) Prices(ctx context.Context) (map[string]Price, error) {
	return listPrices(ctx, s.db)
}

const upsertPrice = `INSERT INTO prices (model, input_micros, cached_input_micros, output_micros, source, updated_ms) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (model) DO UPDATE SET input_micros = excluded.input_micros, cached_input_micros = excluded.cached_input_micros,
  output_micros = excluded.output_micros, source = excluded.source, updated_ms = excluded.updated_ms`

// PutPrices stores prices in one transaction and returns how many it
// wrote. A price whose stored source is SourceSet is kept (not counted)
// unless replace, or unless the new price is itself SourceSet. A running
// runtime takes them at its next admission.
func (s *Store) PutPrices(ctx context.Context, ps []Price, replace bool) (int, error) {
	now := s.clk.Now()
	if err := ValidatePrices(ps); err != nil {
		return 0, err
	}
	wrote := 0
	err := s.execConfig(ctx, func(ctx context.Context, q execQuerier) error {
		wrote = 0
		for _, p := range ps {
			if p.Updated.IsZero() {
				p.Updated = now
			}
			if !replace && p.Source != SourceSet {
				var src string
				err := q.QueryRowContext(ctx, `SELECT source FROM prices WHERE model = ?`, p.Model).Scan(&src)
				if err == nil && src == SourceSet {
					continue
				}
			}
			if _, err := q.ExecContext(ctx, upsertPrice, p.Model, p.InputMicros, p.CachedInputMicros.arg(), p.OutputMicros, p.Source, p.Updated.UnixMilli()); err != nil {
				return err
			}
			wrote++
		}
		return bumpConfig(ctx, q)
	})
	return wrote, err
}

// RemovePrice deletes a model's price; ErrNotFound when there is none.
func (s *Store) RemovePrice(ctx context.Context, model string) error {
	return s.execConfig(ctx, func(ctx context.Context, q execQuerier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM prices WHERE model = ?`, model)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return refuse(fmt.Errorf("price of %q: %w", model, ErrNotFound))
		}
		return bumpConfig(ctx, q)
	})
}
