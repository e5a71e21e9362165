package ledger

import (
	"database/sql"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

func foldFrontier(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var f int64
	if err := db.QueryRow(qFoldUntil).Scan(&f); err != nil {
		t.Fatal(err)
	}
	return f
}

func rollupRows(t *testing.T, db *sql.DB) (minutes, dims int) {
	t.Helper()
	if err := db.QueryRow(`SELECT (SELECT COUNT(*) FROM usage_minute), (SELECT COUNT(*) FROM usage_hour_dims)`).Scan(&minutes, &dims); err != nil {
		t.Fatal(err)
	}
	return minutes, dims
}

// A request writes its usage row and nothing else (migration 0006): the
// rollups gain its row when the writer folds, after foldAge or foldRows
// reservations. Budget windows count it all along.
func TestRequestWritesOnlyItsRow(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	db := openRaw(t, path)

	var recs []rec
	for i := range 20 {
		clk.Advance(100 * time.Millisecond)
		id := fmt.Sprint("r", i)
		reserve(t, s, id)
		settle(t, s, id, 10, 200)
		recs = append(recs, rec{ts: clk.Now(), tokens: Known(10)})
	}
	if m, d := rollupRows(t, db); m != 0 || d != 0 {
		t.Fatalf("after 20 requests in 2s: %d minute and %d report rollup rows, want none (the rows are not folded yet)", m, d)
	}
	w := Window{t0, clk.Now().Add(time.Millisecond)}
	if got, want := viewTotals(t, s, w), rawTotals(recs, w.From, w.To); got != want {
		t.Fatalf("window over unfolded rows = %+v, want %+v", got, want)
	}

	// foldAge later, the next write folds them.
	clk.Advance(time.Duration(foldAge) * time.Millisecond)
	reserve(t, s, "late")
	if f := foldFrontier(t, db); f != clk.Now().UnixMilli() {
		t.Fatalf("fold_until = %d, want %d (now: the rows before it are folded)", f, clk.Now().UnixMilli())
	}
	var requests, tokens int64
	if err := db.QueryRow(`SELECT SUM(requests), SUM(tokens) FROM usage_minute`).Scan(&requests, &tokens); err != nil {
		t.Fatal(err)
	}
	if requests != 20 || tokens != 200 {
		t.Fatalf("minute rollup after the fold = %d requests, %d tokens; want 20, 200", requests, tokens)
	}
}

// The rollups count every row before the fold frontier exactly once, and
// no row after it, whatever happens around the frontier: chunks that end
// mid-minute, many rows in one millisecond, reservations folded while open
// and then settled or released, rows written behind the frontier by a
// process whose clock is behind, both processes folding. Windows and
// reports, read by either process, equal the raw rows throughout.
func TestFoldCountsEveryRowOnce(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	s.w.foldRows, s.w.foldChunk, s.w.foldAge = 7, 5, 3000
	// Another rotor process on the same file, its clock 2s behind: many of
	// its reservations land behind the frontier the first one moved.
	otherClk := clock.NewFake(t0.Add(-2 * time.Second))
	other := openAt(t, path, otherClk)
	other.w.foldRows, other.w.foldChunk, other.w.foldAge = 4, 3, 2000
	db := openRaw(t, path)

	type row struct {
		rec
		status int
	}
	rows := map[string]*row{}
	var open []string
	var lateInserts, lateEnds, folds int
	lastF := foldFrontier(t, db)
	rng := rand.New(rand.NewSource(7))
	end := func(st *Store, id string) {
		if rows[id].ts.UnixMilli() < foldFrontier(t, db) {
			lateEnds++
		}
		if rng.Intn(3) == 0 {
			if err := st.Release(ctx, id); err != nil {
				t.Fatal(err)
			}
			delete(rows, id)
			return
		}
		r := rows[id]
		r.status = []int{200, 200, 429, 502}[rng.Intn(4)]
		n := rng.Int63n(1000)
		if r.status != 200 {
			r.tokens = Count{}
			if err := st.Settle(ctx, Settlement{RequestID: id, Model: "m", Credential: "team-a", Attempts: 1, Status: r.status}); err != nil {
				t.Fatal(err)
			}
		} else {
			r.tokens = Known(n)
			settle(t, st, id, n, 200)
		}
		r.open = false
	}
	check := func() {
		t.Helper()
		f := foldFrontier(t, db)
		// Minute and report rollups against the raw rows before f.
		wantMin := map[int64]Totals{}
		type dimKey struct{ hour, status int64 }
		wantDims := map[dimKey][2]int64{}
		var all []rec
		for _, r := range rows {
			all = append(all, r.rec)
			ts := r.ts.UnixMilli()
			if ts >= f {
				continue
			}
			m := ts / minuteMS
			tot := wantMin[m]
			tot.Add(rawTotals([]rec{r.rec}, r.ts, r.ts.Add(time.Millisecond)))
			wantMin[m] = tot
			if !r.open {
				k := dimKey{ts / hourMS, int64(r.status)}
				d := wantDims[k]
				d[0]++
				if r.tokens.Known {
					d[1] += r.tokens.V
				}
				wantDims[k] = d
			}
		}
		got, err := db.Query(`SELECT bucket, requests, tokens, tokens_null, cost_micros, cost_null FROM usage_minute WHERE requests <> 0 OR tokens <> 0 OR tokens_null <> 0 OR cost_null <> 0`)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for got.Next() {
			var b int64
			var tot Totals
			if err := got.Scan(&b, &tot.Requests, &tot.Tokens, &tot.TokensUnknown, &tot.CostMicros, &tot.CostUnknown); err != nil {
				t.Fatal(err)
			}
			if tot != wantMin[b] {
				t.Fatalf("frontier %d: usage_minute %d = %+v, want %+v", f, b, tot, wantMin[b])
			}
			n++
		}
		got.Close()
		if n != len(wantMin) {
			t.Fatalf("frontier %d: %d minute rollup rows, want %d", f, n, len(wantMin))
		}
		got, err = db.Query(`SELECT bucket, status, SUM(requests), SUM(total_tokens) FROM usage_hour_dims GROUP BY 1, 2 HAVING SUM(requests) <> 0 OR SUM(total_tokens) <> 0`)
		if err != nil {
			t.Fatal(err)
		}
		n = 0
		for got.Next() {
			var k dimKey
			var d [2]int64
			if err := got.Scan(&k.hour, &k.status, &d[0], &d[1]); err != nil {
				t.Fatal(err)
			}
			if d != wantDims[k] {
				t.Fatalf("frontier %d: report rollup hour %d status %d = %v, want %v", f, k.hour, k.status, d, wantDims[k])
			}
			n++
		}
		got.Close()
		if n != len(wantDims) {
			t.Fatalf("frontier %d: %d report rollup groups, want %d", f, n, len(wantDims))
		}
		if _, wrong, ahead := hourRollupDiff(t, db); wrong != 0 || ahead != 0 {
			t.Fatalf("frontier %d: %d hour rows differ from the raw rows, %d ahead of the hour frontier", f, wrong, ahead)
		}

		// Windows around the frontier, read by both processes.
		now := clk.Now()
		for range 20 {
			from := t0.Add(-time.Minute).Add(time.Duration(rng.Int63n(int64(now.Sub(t0) + time.Minute))).Truncate(time.Millisecond))
			if rng.Intn(3) == 0 {
				from = time.UnixMilli(f - rng.Int63n(3*minuteMS)).UTC()
			}
			to := now.Add(time.Millisecond)
			if rng.Intn(2) == 0 {
				to = from.Add(time.Duration(rng.Int63n(int64(to.Sub(from)) + 1)))
			}
			want := rawTotals(all, from, to)
			for _, st := range []*Store{s, other} {
				if got := viewTotals(t, st, Window{from, to}); got != want {
					t.Fatalf("frontier %d: Totals[%s, %s) = %+v, want %+v", f, from, to, got, want)
				}
			}
		}

		// Reach and the newest row of unknown cost (every row here) walk
		// the rows in time order across the frontier.
		sort.Slice(all, func(i, j int) bool { return all[i].ts.Before(all[j].ts) })
		times, ones := make([]time.Time, len(all)), make([]int64, len(all))
		for i, r := range all {
			times[i], ones[i] = r.ts, 1
		}
		for range 5 {
			w := Window{time.UnixMilli(f - rng.Int63n(5*minuteMS)).UTC(), now.Add(time.Millisecond)}
			if err := s.View(ctx, func(r WindowReader) error {
				for range 5 {
					need := 1 + rng.Int63n(int64(len(all))/4+2)
					at, ok, err := r.Reach(w, MeasureRequests, need)
					if err != nil {
						return err
					}
					if want, wantOK := rawReach(times, ones, w, need); ok != wantOK || ok && !at.Equal(want) {
						t.Fatalf("frontier %d: Reach([%s, %s), %d) = %v, %v; want %v, %v", f, w.From, w.To, need, at, ok, want, wantOK)
					}
				}
				at, ok, err := r.NewestUnknownCost(w)
				if err != nil {
					return err
				}
				want, wantOK := time.Time{}, false
				for _, ts := range times {
					if !ts.Before(w.From) && ts.Before(w.To) {
						want, wantOK = ts, true
					}
				}
				if ok != wantOK || ok && !at.Equal(want) {
					t.Fatalf("frontier %d: NewestUnknownCost([%s, %s)) = %v, %v; want %v, %v", f, w.From, w.To, at, ok, want, wantOK)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}

		// A report by status over whole hours and partial ones.
		for _, w := range []Window{{t0.Add(-time.Hour).Truncate(time.Hour), now.Add(time.Hour).Truncate(time.Hour)}, {t0.Add(17 * time.Second), now}} {
			want := map[string][2]int64{}
			for _, r := range rows {
				if r.ts.Before(w.From) || !r.ts.Before(w.To) {
					continue
				}
				k := StatusLabel(r.status)
				v := want[k]
				v[0]++
				if r.tokens.Known {
					v[1] += r.tokens.V
				}
				want[k] = v
			}
			rep, err := s.Report(ctx, ReportQuery{From: w.From, To: w.To, By: []string{KeyStatus}})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][2]int64{}
			for _, r := range rep {
				got[r.Keys[0]] = [2]int64{r.Requests, r.TotalTokens}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("frontier %d: report [%s, %s) by status = %v, want %v", f, w.From, w.To, got, want)
			}
		}
	}

	for i := range 500 {
		var step time.Duration
		switch k := rng.Intn(20); {
		case k < 4: // a stopped clock: many rows in one millisecond
		case k < 18:
			step = time.Duration(rng.Int63n(int64(1500 * time.Millisecond))).Truncate(time.Millisecond)
		case k < 19:
			step = time.Duration(rng.Int63n(int64(3 * time.Minute))).Truncate(time.Millisecond)
		default:
			step = time.Duration(rng.Int63n(int64(2 * time.Hour))).Truncate(time.Millisecond)
		}
		clk.Advance(step)
		otherClk.Advance(step)
		st, stClk := s, clk
		if rng.Intn(3) == 0 {
			st, stClk = other, otherClk
		}
		id := fmt.Sprint("r", i)
		if stClk.Now().UnixMilli() < foldFrontier(t, db) {
			lateInserts++
		}
		reserve(t, st, id)
		rows[id] = &row{rec: rec{ts: stClk.Now(), open: true}}
		if rng.Intn(4) == 0 {
			open = append(open, id)
		} else {
			end(st, id)
		}
		if len(open) > 0 && rng.Intn(5) == 0 {
			j := rng.Intn(len(open))
			id := open[j]
			open = append(open[:j], open[j+1:]...)
			end([]*Store{s, other}[rng.Intn(2)], id)
		}
		if f := foldFrontier(t, db); f != lastF {
			folds++
			lastF = f
		}
		if i%25 == 24 {
			check()
		}
	}
	check()
	// The run must have gone through every case it claims to test.
	if folds < 50 || lateInserts < 10 || lateEnds < 10 {
		t.Fatalf("the run moved the frontier %d times, wrote %d rows and ended %d reservations behind it; want at least 50, 10 and 10", folds, lateInserts, lateEnds)
	}
	t.Logf("frontier moved %d times; %d rows written and %d reservations ended behind it", folds, lateInserts, lateEnds)
}

// A backlog of unfolded rows (left by a process that died, say) is folded
// a chunk per batch, so that no batch stalls on all of it.
func TestFoldBacklogInChunks(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	db := openRaw(t, path)
	reserve(t, s, "first") // folds the empty ledger up to now
	start := foldFrontier(t, db)
	var ts []int64
	for i := range 12 {
		clk.Advance(time.Millisecond)
		reserve(t, s, fmt.Sprint("r", i))
		ts = append(ts, clk.Now().UnixMilli())
	}
	if f := foldFrontier(t, db); f != start {
		t.Fatalf("fold_until moved to %d before a fold was due", f)
	}
	s.w.foldRows, s.w.foldChunk = 1, 5
	// "first" is at the frontier: the first chunk is it and r0..r3, the
	// second r4..r8; the third, r9..r11 and the two rows the first two
	// batches wrote, catches up with the clock.
	for i, want := range []int64{ts[4], ts[9], 0} {
		clk.Advance(time.Millisecond)
		reserve(t, s, fmt.Sprint("b", i))
		if want == 0 {
			want = clk.Now().UnixMilli()
		}
		if f := foldFrontier(t, db); f != want {
			t.Fatalf("batch %d: fold_until = %d, want %d (a chunk of 5 rows per batch)", i, f, want)
		}
	}
}

// The hour rollup is written from the minutes, so it never passes the fold
// frontier: hours whose rows are not all folded yet wait, and are written
// exactly once the fold has passed them.
func TestHourRollupWaitsForTheFold(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	db := openRaw(t, path)
	s.w.foldRows, s.w.foldAge = 1<<30, 1<<60 // a backlog: nothing folds
	for i := range 30 {
		clk.Advance(10 * time.Minute)
		id := fmt.Sprint("r", i)
		reserve(t, s, id)
		settle(t, s, id, 10, 200)
	}
	s.w.foldRows, s.w.foldChunk = 1, 4
	for i := range 12 {
		clk.Advance(time.Second)
		reserve(t, s, fmt.Sprint("b", i))
		f := foldFrontier(t, db)
		hour, wrong, ahead := hourRollupDiff(t, db)
		if hour*hourMS > f || wrong != 0 || ahead != 0 {
			t.Fatalf("batch %d: hour rollup written up to hour %d (%d rows wrong, %d ahead) with the fold at %d", i, hour, wrong, ahead, f)
		}
	}
	if hour, _, _ := hourRollupDiff(t, db); hour < t0.UnixMilli()/hourMS+4 {
		t.Fatalf("hour_rollup_until = %d: the hours behind the caught-up fold were never written", hour)
	}
}

// A request settled after the fold passed its reservation (a stream of
// more than foldAge) is in the report rollup under the settlement's
// credential and model, as a request settled at once is: `ledger report
// --by credential,model` over whole hours reads it there.
func TestSettledAfterFoldReportsItsCredential(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	db := openRaw(t, path)
	reserve(t, s, "long")
	clk.Advance(11 * time.Second) // past foldAge: the next batch folds
	reserve(t, s, "next")
	if f := foldFrontier(t, db); f <= t0.UnixMilli() {
		t.Fatalf("fold frontier %d: the reservation was not folded", f)
	}
	if err := s.Settle(ctx, Settlement{RequestID: "long", Model: "m-2", Credential: "team-b", Attempts: 1, Status: 200,
		InputTokens: Known(3), OutputTokens: Known(4), TotalTokens: Known(7)}); err != nil {
		t.Fatal(err)
	}
	from := t0.Truncate(time.Hour)
	rep, err := s.Report(ctx, ReportQuery{From: from, To: from.Add(time.Hour), By: []string{KeyCredential, KeyModel, KeyStatus}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep {
		got = append(got, fmt.Sprintf("%v:%d:%d", r.Keys, r.Requests, r.TotalTokens))
	}
	if want := []string{"[ m unsettled]:1:0", "[team-b m-2 200]:1:7"}; !slices.Equal(got, want) {
		t.Errorf("report by credential, model, status = %v, want %v", got, want)
	}
}
