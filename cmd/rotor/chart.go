package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
)

// Chart widths: a line never exceeds the width (between the bounds).
const (
	chartDefaultWidth = 80
	chartMinWidth     = 40
	chartMaxWidth     = 160
	chartDay          = "2006-01-02"
	// chartMaxDays is the longest range a chart draws: ten years.
	chartMaxDays = 3660
)

// checkChart accepts --chart only with --by day and the table format: a
// chart is a picture, not data for scripts.
func (o *reportOptions) checkChart() error {
	if !o.Chart {
		return nil
	}
	if len(o.Query.By) != 1 || o.Query.By[0] != ledger.KeyDay {
		return usageErrorf("--chart draws usage per day: use it with --by day")
	}
	if o.Format != FormatTable {
		return usageErrorf("--chart draws in the terminal: it cannot go with --format or --jq (use those for data)")
	}
	// A line a day: a range of centuries would print millions of them.
	if days := float64(o.Query.To.Unix()-o.Query.From.Unix()) / 86400; days > chartMaxDays {
		return usageErrorf("--chart draws a line a day: the range spans %.0f days, at most %d; narrow --since or --from/--to", math.Ceil(days), chartMaxDays)
	}
	return nil
}

// chartBar is one day's bar: its known value, and how many of its rows are
// of unknown value.
type chartBar struct {
	day      string
	value    int64
	requests int64
	unknown  int64
}

// writeChart draws tokens and known cost per UTC day of q's range as text
// bars: a day holding rows of unknown value says so beside its bar, and a
// day whose every row is of unknown cost draws no bar but "unknown", never
// a bar of 0.
func writeChart(w io.Writer, q ledger.ReportQuery, rows []ledger.ReportRow, width int) error {
	if width <= 0 {
		width = chartDefaultWidth
	}
	width = min(max(width, chartMinWidth), chartMaxWidth)
	byDay := map[string]ledger.ReportRow{}
	for _, r := range rows {
		byDay[r.Keys[0]] = r
	}
	var tokens, cost []chartBar
	from := q.From.UTC().Truncate(24 * time.Hour)
	for d := from; d.Before(q.To); d = d.AddDate(0, 0, 1) {
		r := byDay[d.Format(chartDay)]
		unknownTokens := max(r.TokensUnknown, r.InputUnknown, r.OutputUnknown)
		tokens = append(tokens, chartBar{day: d.Format(chartDay), value: r.TotalTokens, requests: r.Requests, unknown: unknownTokens})
		cost = append(cost, chartBar{day: d.Format(chartDay), value: r.CostMicros, requests: r.Requests, unknown: r.CostUnknown})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tokens per day (UTC), %s to %s\n", q.From.UTC().Format(time.RFC3339), q.To.UTC().Format(time.RFC3339))
	drawBars(&b, tokens, width, func(v int64) string { return strconv.FormatInt(v, 10) })
	b.WriteString("known cost per day (USD)\n")
	drawBars(&b, cost, width, budgets.FormatCost)
	_, err := io.WriteString(w, b.String())
	return err
}

func drawBars(b *strings.Builder, bars []chartBar, width int, format func(int64) string) {
	labels := make([]string, len(bars))
	maxV, labelW := int64(0), 0
	for i, c := range bars {
		switch {
		case c.requests > 0 && c.unknown >= c.requests:
			labels[i] = fmt.Sprintf("unknown (%d %s)", c.unknown, plural(c.unknown, "row"))
		case c.unknown > 0:
			labels[i] = fmt.Sprintf("%s + %d %s unknown", format(c.value), c.unknown, plural(c.unknown, "row"))
		default:
			labels[i] = format(c.value)
		}
		maxV = max(maxV, c.value)
		labelW = max(labelW, len(labels[i]))
	}
	// day, space, bar, space, label.
	barW := max(width-len(chartDay)-2-labelW, 1)
	for i, c := range bars {
		n := 0
		if c.value > 0 && maxV > 0 { // a day of unknown cost only has no known value: no bar
			n = max(int(float64(c.value)/float64(maxV)*float64(barW)+0.5), 1)
		}
		line := c.day + " " + strings.Repeat("#", n) + strings.Repeat(" ", barW-n) + " " + labels[i]
		b.WriteString(strings.TrimRight(line, " "))
		b.WriteByte('\n')
	}
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
