package conformance

import (
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/ledger"
)

// reportRow is a row as the brute-force report sees it.
type reportRow struct {
	ts                                      time.Time
	settled                                 bool
	op, model, credential, client           string
	status                                  int
	errorCode                               string
	in, out, total, cached, reasoning, cost ledger.Count
}

func (r reportRow) key(k string) string {
	switch k {
	case ledger.KeyOperation:
		return r.op
	case ledger.KeyModel:
		return r.model
	case ledger.KeyDay:
		return r.ts.UTC().Format("2006-01-02")
	case ledger.KeyCredential:
		return r.credential
	case ledger.KeyClient:
		return r.client
	case ledger.KeyStatus:
		return ledger.StatusLabel(r.status)
	}
	panic("unknown key " + k)
}

func addCount(sum, unknown *int64, c ledger.Count) {
	if c.Known {
		*sum += c.V
	} else {
		*unknown++
	}
}

// bruteReport groups rows in [from, to) by keys as DESIGN says: sums of
// known values, rows of unknown values counted beside them, errors are
// settled rows with status >= 400 or none, or an error code.
func bruteReport(rows []reportRow, from, to time.Time, keys []string) []ledger.ReportRow {
	groups := map[string]*ledger.ReportRow{}
	for _, r := range rows {
		if r.ts.Before(from) || !r.ts.Before(to) {
			continue
		}
		vals := make([]string, len(keys))
		for i, k := range keys {
			vals[i] = r.key(k)
		}
		g := groups[strings.Join(vals, "\x00")]
		if g == nil {
			g = &ledger.ReportRow{Keys: vals}
			groups[strings.Join(vals, "\x00")] = g
		}
		g.Requests++
		addCount(&g.InputTokens, &g.InputUnknown, r.in)
		addCount(&g.OutputTokens, &g.OutputUnknown, r.out)
		addCount(&g.TotalTokens, &g.TokensUnknown, r.total)
		addCount(&g.CachedInputTokens, &g.CachedUnknown, r.cached)
		addCount(&g.ReasoningTokens, &g.ReasoningUnknown, r.reasoning)
		addCount(&g.CostMicros, &g.CostUnknown, r.cost)
		if r.settled && (r.status >= 400 || r.status == 0 || r.errorCode != "") {
			g.Errors++
		}
	}
	var out []ledger.ReportRow
	for _, g := range groups {
		g.CostKnown = g.CostUnknown == 0
		out = append(out, *g)
	}
	sortReport(out)
	return out
}

func sortReport(rs []ledger.ReportRow) {
	sort.Slice(rs, func(i, j int) bool { return slices.Compare(rs[i].Keys, rs[j].Keys) < 0 })
}

func describeReport(rs []ledger.ReportRow) string {
	var b strings.Builder
	for _, r := range rs {
		k := r.Keys
		r.Keys = nil
		fmt.Fprintf(&b, "\n  %q %+v", k, r)
	}
	return b.String()
}

func sameReport(a, b []ledger.ReportRow) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !slices.Equal(x.Keys, y.Keys) {
			return false
		}
		x.Keys, y.Keys = nil, nil
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// Reports group rows, written by two processes, by every key and pair of
// keys as a brute-force sum over the rows does, for windows inside one hour, with partial hours at
// both edges, and across midnight, read through either handle.
func testReportGroups(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	other := d.open()
	setPrice(t, l, gptPrice)
	setPrice(t, l, ledger.Price{Model: "mini", InputMicros: 3_000_000, Source: ledger.SourceSet}) // 3 micro-USD per input token
	start := time.Date(2026, 11, 30, 22, 10, 0, 123_000_000, time.UTC)
	d.clk.Set(start)
	rng := rand.New(rand.NewSource(4))
	pick := func(s ...string) string { return s[rng.Intn(len(s))] }
	var rows []reportRow
	for i := range 120 {
		d.clk.Advance(time.Duration(rng.Int63n(int64(4 * time.Minute))).Truncate(time.Millisecond))
		id := fmt.Sprint("r", i)
		l := []ledger.Ledger{l, other}[rng.Intn(2)] // either process reserves and settles
		r := reportRow{ts: d.clk.Now(), op: pick(opChat, opChat, opDecisions), model: pick("gpt", "mini", "free"), client: pick("ci", "default")}
		if err := l.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: r.op, Pool: "api", Model: r.model, Client: r.client, Expires: r.ts.Add(time.Hour)}, nil); err != nil {
			t.Fatal(err)
		}
		st := ledger.Settlement{RequestID: id, Model: r.model, Credential: pick("key-a", "key-b"), Attempts: 1}
		price := map[string]func(in, out int64) int64{"gpt": func(in, out int64) int64 { return in + 2*out }, "mini": func(in, _ int64) int64 { return 3 * in }}[r.model]
		switch k := rng.Intn(10); {
		case k == 0: // left open
			rows = append(rows, r)
			continue
		case k == 1: // refused by the provider: 0 tokens, 0 cost
			st.Status, st.ErrorCode, st.Refused = 429, pick("rate_limited", ""), true
			r.in, r.out, r.total, r.cached, r.reasoning, r.cost = ledger.Known(0), ledger.Known(0), ledger.Known(0), ledger.Known(0), ledger.Known(0), ledger.Known(0)
		case k == 2: // a 502, or no answer at all (no status, no code): nothing known, an error
			st.Status, st.ErrorCode = 502, "upstream_error"
			if i%2 == 0 {
				st.Status, st.ErrorCode = 0, ""
			}
		default:
			in, out := rng.Int63n(1000), rng.Int63n(1000)
			st.Status, st.InputTokens, st.OutputTokens, st.TotalTokens = 200, ledger.Known(in), ledger.Known(out), ledger.Known(in+out)
			r.in, r.out, r.total = st.InputTokens, st.OutputTokens, st.TotalTokens
			if rng.Intn(2) == 0 {
				st.CachedInputTokens, st.ReasoningTokens = ledger.Known(in/3), ledger.Known(out/4)
				r.cached, r.reasoning = st.CachedInputTokens, st.ReasoningTokens
			}
			if k == 3 { // a stream cut after its usage was seen
				st.ErrorCode = "upstream_stream_cut"
			}
			if price != nil {
				r.cost = ledger.Known(price(in, out))
			}
		}
		if r.op == opDecisions {
			r.cost = ledger.Count{}
		}
		settle(t, l, st)
		r.settled, r.credential, r.status, r.errorCode = true, st.Credential, st.Status, st.ErrorCode
		rows = append(rows, r)
	}
	end := d.clk.Now()
	if end.Sub(start) < 3*time.Hour {
		t.Fatalf("rows span %v, want hours across midnight", end.Sub(start))
	}
	d.clk.Advance(time.Minute)
	windows := [][2]time.Time{
		{start.Add(-time.Hour), end.Add(time.Hour)},                                      // every row
		{start.Truncate(time.Hour), start.Truncate(time.Hour).Add(time.Hour)},            // one whole hour
		{start.Add(7 * time.Minute), start.Add(41 * time.Minute)},                        // inside one hour
		{start.Add(27*time.Minute + 12345*time.Millisecond), end.Add(-13 * time.Minute)}, // partial hours at both edges
		{rows[10].ts, rows[100].ts},                                                      // exactly at rows: from included, to excluded
	}
	groupings := [][]string{nil}
	for i, k := range ledger.ReportKeys {
		groupings = append(groupings, []string{k})
		groupings = append(groupings, []string{k, ledger.ReportKeys[(i+1)%len(ledger.ReportKeys)]})
	}
	for wi, w := range windows {
		for gi, by := range groupings {
			reader := []ledger.Ledger{l, other}[(wi+gi)%2]
			got, err := reader.Report(ctx, ledger.ReportQuery{From: w[0], To: w[1], By: by})
			if err != nil {
				t.Fatalf("Report(%v): %v", by, err)
			}
			sortReport(got)
			if want := bruteReport(rows, w[0], w[1], by); !sameReport(got, want) {
				t.Errorf("report of [%s, %s) by %v:\ngot%s\nwant%s", w[0].Format(time.RFC3339Nano), w[1].Format(time.RFC3339Nano), by,
					describeReport(got), describeReport(want))
			}
		}
	}
}

// A group holding a row of unknown cost or tokens shows them as unknown
// (CostKnown false, the count of unknown rows) beside the sum of the
// known rows, never a partial sum that reads as whole; an open
// reservation is "unsettled".
func testReportUnknown(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	d.reserve(l, "known", opChat, "gpt")
	settle(t, l, usage("known", "gpt", 10, 5)) // 20 micro-USD
	d.reserve(l, "cut", opChat, "gpt")
	settle(t, l, ledger.Settlement{RequestID: "cut", Model: "gpt", Credential: "key-a", Status: 200, ErrorCode: "upstream_stream_cut"})
	d.reserve(l, "open", opChat, "gpt")
	rep, err := l.Report(ctx, ledger.ReportQuery{From: t0, To: t0.Add(time.Millisecond), By: []string{ledger.KeyModel}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep) != 1 {
		t.Fatalf("report = %s, want one group", describeReport(rep))
	}
	g := rep[0]
	if g.Requests != 3 || g.CostKnown || g.CostMicros != 20 || g.CostUnknown != 2 || g.TotalTokens != 15 || g.TokensUnknown != 2 || g.Errors != 1 {
		t.Errorf("group = %s; want 3 requests, cost unknown (20 known, 2 rows unknown), tokens 15 known + 2 rows unknown, 1 error (the cut stream)", describeReport(rep))
	}
	rep, err = l.Report(ctx, ledger.ReportQuery{From: t0, To: t0.Add(time.Millisecond), By: []string{ledger.KeyStatus}})
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, r := range rep {
		labels = append(labels, r.Keys[0])
	}
	sort.Strings(labels)
	if !slices.Equal(labels, []string{"200", "unsettled"}) {
		t.Errorf("statuses = %v, want 200 and unsettled", labels)
	}
	for _, r := range rep {
		if r.Keys[0] == "200" && (!r.CostKnown) == (r.CostUnknown == 0) {
			t.Errorf("group 200: CostKnown %v with %d unknown rows", r.CostKnown, r.CostUnknown)
		}
	}
}

// A report's errors are the settled rows with a status >= 400 or none, or
// an error code (DESIGN), in whole hours (which an engine may read from a
// rollup) as in partial ones: a 400 with no code is one, a 502 stays one
// after `rotor ledger settle` gives it its tokens, a 200 is none.
func testReportErrors(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	// No usage, no row: not a row of zero requests.
	if rep, err := l.Report(ctx, ledger.ReportQuery{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}); err != nil || len(rep) != 0 {
		t.Errorf("report of an empty ledger = %s, %v; want no row", describeReport(rep), err)
	}
	setPrice(t, l, gptPrice)
	d.reserve(l, "bad-request", opChat, "gpt")
	settle(t, l, ledger.Settlement{RequestID: "bad-request", Model: "gpt", Credential: "key-a", Attempts: 1, Status: 400, Refused: true})
	d.reserve(l, "bad-gateway", opChat, "gpt")
	settle(t, l, ledger.Settlement{RequestID: "bad-gateway", Model: "gpt", Credential: "key-a", Attempts: 1, Status: 502})
	d.reserve(l, "ok", opChat, "gpt")
	// Settled later than the rollups may have counted their reservations
	// (SQLite folds rows 10 s behind): still errors, once.
	d.reserve(l, "slow-400", opChat, "gpt")
	d.reserve(l, "slow-cut", opChat, "gpt")
	d.clk.Advance(11 * time.Second)
	settle(t, l, usage("ok", "gpt", 1, 1))
	settle(t, l, ledger.Settlement{RequestID: "slow-400", Model: "gpt", Credential: "key-a", Attempts: 1, Status: 400, Refused: true})
	settle(t, l, ledger.Settlement{RequestID: "slow-cut", Model: "gpt", Credential: "key-a", Attempts: 1, Status: 200, ErrorCode: "upstream_stream_cut"})
	d.clk.Advance(2 * time.Hour)
	if err := l.Resolve(ctx, ledger.Resolution{RequestID: "bad-gateway", Input: ledger.Known(10), Output: ledger.Known(5)}); err != nil {
		t.Fatalf("Resolve(bad-gateway): %v", err)
	}
	hour := t0.Truncate(time.Hour)
	for _, w := range [][2]time.Time{{hour, hour.Add(time.Hour)}, {t0, t0.Add(time.Millisecond)}} {
		rep, err := l.Report(ctx, ledger.ReportQuery{From: w[0], To: w[1], By: []string{ledger.KeyStatus}})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][2]int64{}
		for _, r := range rep {
			got[r.Keys[0]] = [2]int64{r.Requests, r.Errors}
		}
		if want := map[string][2]int64{"200": {2, 1}, "400": {2, 2}, "502": {1, 1}}; !maps.Equal(got, want) {
			t.Errorf("report of [%s, %s) by status: %s; want 200 (2 requests, the cut stream an error), 400 (2, both errors) and 502 (1, an error)",
				w[0].Format(time.RFC3339Nano), w[1].Format(time.RFC3339Nano), describeReport(rep))
		}
	}
}

func testReportBadKey(t *testing.T, e Engine) {
	_, l := fresh(t, e)
	if _, err := l.Report(ctx, ledger.ReportQuery{From: t0, To: t0.Add(time.Hour), By: []string{"colour"}}); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Errorf("Report by an unknown key = %v, want an error naming it", err)
	}
}
