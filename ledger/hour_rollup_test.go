package ledger

import (
	"database/sql"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

// hourRollupDiff counts the hours before the frontier whose usage_hour row
// differs from a GROUP BY of the raw rows (a reservation counts one request
// of unknown tokens and cost), and the rows at or after it, which must not
// exist.
func hourRollupDiff(t *testing.T, db *sql.DB) (frontier int64, wrong, ahead int) {
	t.Helper()
	if err := db.QueryRow(`SELECT value FROM meta WHERE key = 'hour_rollup_until'`).Scan(&frontier); err != nil {
		t.Fatal(err)
	}
	raw := fmt.Sprintf(`SELECT ts_ms / 3600000, COUNT(*), COALESCE(SUM(total_tokens), 0), COUNT(*) - COUNT(total_tokens), COALESCE(SUM(cost_micros), 0), COUNT(*) - COUNT(cost_micros)
FROM usage WHERE ts_ms < %d GROUP BY 1`, frontier*hourMS)
	stored := fmt.Sprintf(`SELECT * FROM usage_hour WHERE requests <> 0 AND bucket < %d`, frontier)
	for _, q := range []string{raw + " EXCEPT " + stored, stored + " EXCEPT " + raw} {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM (" + q + ")").Scan(&n); err != nil {
			t.Fatal(err)
		}
		wrong += n
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM usage_hour WHERE bucket >= ?`, frontier).Scan(&ahead); err != nil {
		t.Fatal(err)
	}
	return frontier, wrong, ahead
}

// The hour rollup is written a full hour behind (migration 0005): a
// request's writes touch no hour row, the hours that ended more than an
// hour ago are written from their minutes, and a settlement or release of a
// reservation made before the frontier still reaches its hour's row.
// Windows and reports read the same totals as the raw rows throughout.
func TestHourRollupWrittenAnHourBehind(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	// A second store on the same file stands for another rotor process,
	// with a clock 40 minutes ahead: it writes rows of its own, so it moves
	// the frontier before the first store would, and settles some of the
	// first one's late reservations.
	otherClk := clock.NewFake(t0.Add(40 * time.Minute))
	other := openAt(t, path, otherClk)
	db := openRaw(t, path)

	rng := rand.New(rand.NewSource(5))
	recs := map[string]*rec{}
	var late []string // reservations left open for hours
	for i := 0; i < 600; i++ {
		step := time.Duration(rng.Int63n(int64(2 * time.Minute))).Truncate(time.Millisecond)
		clk.Advance(step)
		otherClk.Advance(step)
		if rng.Intn(4) == 0 {
			id := fmt.Sprint("o", i)
			reserve(t, other, id)
			n := rng.Int63n(1000)
			settle(t, other, id, n, 200)
			recs[id] = &rec{ts: otherClk.Now(), tokens: Known(n)}
		}
		id := fmt.Sprint("r", i)
		reserve(t, s, id)
		recs[id] = &rec{ts: clk.Now(), open: true}
		if rng.Intn(6) == 0 {
			late = append(late, id)
		} else {
			n := rng.Int63n(1000)
			settle(t, s, id, n, 200)
			recs[id].tokens, recs[id].open = Known(n), false
		}
		// Now and then, end a late reservation: settled by either store,
		// or released (no provider call), hours after it was made.
		if len(late) > 0 && rng.Intn(8) == 0 {
			j := rng.Intn(len(late))
			id := late[j]
			late = append(late[:j], late[j+1:]...)
			switch rng.Intn(3) {
			case 0:
				if err := s.Release(ctx, id); err != nil {
					t.Fatal(err)
				}
				delete(recs, id)
			case 1:
				n := rng.Int63n(1000)
				settle(t, other, id, n, 200)
				recs[id].tokens, recs[id].open = Known(n), false
			default:
				n := rng.Int63n(1000)
				settle(t, s, id, n, 200)
				recs[id].tokens, recs[id].open = Known(n), false
			}
		}
		if i%50 == 49 {
			frontier, wrong, ahead := hourRollupDiff(t, db)
			if want := FloorTo(clk.Now().UnixMilli(), hourMS)/hourMS - 1; frontier != want && frontier != want+1 {
				t.Fatalf("after %v: hour_rollup_until = %d, want %d (the hour before the current one, or the next on the other clock)", clk.Now(), frontier, want)
			}
			if wrong != 0 || ahead != 0 {
				t.Fatalf("after %v: %d hour rows differ from the raw rows, %d written ahead of the frontier", clk.Now(), wrong, ahead)
			}
		}
	}
	if clk.Now().Sub(t0) < 5*time.Hour {
		t.Fatalf("the run covered %v; it must cross several frontiers", clk.Now().Sub(t0))
	}

	// Windows that start before, at and after the frontier, read by either
	// store, equal the raw rows.
	end := otherClk.Now()
	clk.Set(end)
	var all []rec
	for _, r := range recs {
		all = append(all, *r)
	}
	for i := 0; i < 200; i++ {
		from := t0.Add(time.Duration(rng.Int63n(int64(end.Sub(t0)))).Truncate(time.Millisecond))
		if i%4 == 0 {
			from = from.Truncate(time.Hour)
		}
		to := end.Add(time.Millisecond)
		if i%2 == 0 {
			to = from.Add(time.Duration(rng.Int63n(int64(end.Sub(from)) + 1)))
		}
		want := rawTotals(all, from, to)
		for _, st := range []*Store{s, other} {
			if got := viewTotals(t, st, Window{from, to}); got != want {
				t.Fatalf("Totals[%s, %s) = %+v, want %+v", from, to, got, want)
			}
		}
	}

	// A report over the whole run finds the open reservations in the hours
	// read from minutes as well as in the written ones.
	rows, err := s.Report(ctx, ReportQuery{From: t0.Add(-time.Hour), To: end.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var open int64
	for _, r := range recs {
		if r.open {
			open++
		}
	}
	if len(rows) != 1 || rows[0].Requests != int64(len(recs)) || rows[0].TokensUnknown != open {
		t.Fatalf("report = %+v, want %d requests, %d of unknown tokens", rows, len(recs), open)
	}
}
