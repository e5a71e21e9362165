package dur

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30m", 30 * time.Minute, true},
		{"24h", 24 * time.Hour, true},
		{"7d", 7 * Day, true},
		{"7d12h", 7*Day + 12*time.Hour, true},
		{"1d30m", Day + 30*time.Minute, true},
		{"0s", 0, true},
		{"", 0, false},
		{"d", 0, false},
		{"-1d", 0, false},
		{"-5m", 0, false},
		{"7x", 0, false},
		{"1.5d", 0, false},
		{"99999999d", 0, false},
		// time.Duration ends inside day 106,752: the last whole day
		// parses, the next one and an overflowing remainder do not.
		{"106751d", 106751 * Day, true},
		{"106752d", 0, false},
		{"106751d23h", 106751*Day + 23*time.Hour, true},
		{"106751d48h", 0, false},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{7 * Day, "7d"},
		{Day + 12*time.Hour, "1d12h"},
		{30 * time.Minute, "30m"},
		{90 * time.Second, "1m30s"},
		{2 * time.Hour, "2h"},
		{Day, "1d"},
		{0, "0s"},
	}
	for _, tt := range tests {
		if got := Format(tt.in); got != tt.want {
			t.Errorf("Format(%v) = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := Parse(Format(tt.in)); err != nil || back != tt.in {
			t.Errorf("Parse(Format(%v)) = %v, %v", tt.in, back, err)
		}
	}
}
