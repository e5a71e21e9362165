package budgets

import (
	"fmt"
	"strings"
	"time"

	"github.com/rotorhq/rotor/internal/dur"
	"github.com/rotorhq/rotor/ledger"
)

// Calendar window names (UTC).
const (
	CalendarHour  = "hour"
	CalendarDay   = "day"
	CalendarWeek  = "week" // starts Monday 00:00 UTC
	CalendarMonth = "month"
)

// Window is a budget window: rolling over a duration, or a calendar period
// in UTC.
type Window struct {
	Rolling  time.Duration
	Calendar string
}

// MinRolling is the shortest rolling window: the ledger stores
// millisecond times and rollups by the minute.
const MinRolling = time.Minute

// ParseWindow reads "30m", "24h", "7d", "7d12h" (rolling) or "hour", "day",
// "week", "month" (calendar, UTC).
func ParseWindow(s string) (Window, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case CalendarHour, CalendarDay, CalendarWeek, CalendarMonth:
		return Window{Calendar: strings.ToLower(s)}, nil
	}
	d, err := dur.Parse(s)
	if err != nil {
		return Window{}, fmt.Errorf("window %q: want a duration (30m, 24h, 7d) or hour, day, week, month", s)
	}
	if d < MinRolling {
		return Window{}, fmt.Errorf("window %q: a rolling window must be at least %s", s, MinRolling)
	}
	if d > 366*dur.Day {
		return Window{}, fmt.Errorf("window %q: a rolling window can be at most 366d", s)
	}
	return Window{Rolling: d}, nil
}

// String is the canonical spelling: 24h, 7d, day, month.
func (w Window) String() string {
	if w.Calendar != "" {
		return w.Calendar
	}
	return dur.Format(w.Rolling)
}

// Describe says it in words: "rolling 24h", "calendar day (UTC)".
func (w Window) Describe() string {
	if w.Calendar != "" {
		return "calendar " + w.Calendar + " (UTC)"
	}
	return "rolling " + w.String()
}

// Start returns the start of the window that contains now.
func (w Window) Start(now time.Time) time.Time {
	now = now.UTC()
	switch w.Calendar {
	case CalendarHour:
		return now.Truncate(time.Hour)
	case CalendarDay:
		return time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	case CalendarWeek:
		day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		back := (int(day.Weekday()) + 6) % 7 // days since Monday
		return day.AddDate(0, 0, -back)
	case CalendarMonth:
		return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	// Rolling: rows older than now-d have left; a row at exactly now-d
	// leaves at now.
	return now.Add(-w.Rolling).Add(time.Millisecond)
}

// End returns when the calendar period containing now ends. For rolling
// windows it returns the zero time.
func (w Window) End(now time.Time) time.Time {
	s := w.Start(now)
	switch w.Calendar {
	case CalendarHour:
		return s.Add(time.Hour)
	case CalendarDay:
		return s.AddDate(0, 0, 1)
	case CalendarWeek:
		return s.AddDate(0, 0, 7)
	case CalendarMonth:
		return s.AddDate(0, 1, 0)
	}
	return time.Time{}
}

// Range is the ledger window at now: [Start, now] as a half-open range.
func (w Window) Range(now time.Time) ledger.Window {
	return ledger.Window{From: w.Start(now), To: now.UTC().Add(time.Millisecond)}
}

// leaves returns when a row written at t leaves the window containing now.
func (w Window) leaves(t, now time.Time) time.Time {
	if w.Calendar != "" {
		return w.End(now)
	}
	return t.Add(w.Rolling)
}
