package config

import (
	"errors"
	"testing"
	"time"
)

// The server timeouts and the ledger's busy timeout are real keys: read
// from the file and from ROTOR_* overrides, defaulted, and refused when not
// a positive duration.
func TestServerAndLedgerTimeoutKeys(t *testing.T) {
	d := Default()
	if d.Runtime.ReadHeaderTimeout != 5*time.Second || d.Runtime.ReadTimeout != 30*time.Second || d.Ledger.BusyTimeout != 5*time.Second {
		t.Errorf("defaults = %v %v %v, want 5s 30s 5s", d.Runtime.ReadHeaderTimeout, d.Runtime.ReadTimeout, d.Ledger.BusyTimeout)
	}
	c, err := ParseFile([]byte("runtime: {read_header_timeout: 1s, read_timeout: 2s}\nledger: {busy_timeout: 750ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Runtime.ReadHeaderTimeout != time.Second || c.Runtime.ReadTimeout != 2*time.Second || c.Ledger.BusyTimeout != 750*time.Millisecond {
		t.Errorf("file values = %v %v %v, want 1s 2s 750ms", c.Runtime.ReadHeaderTimeout, c.Runtime.ReadTimeout, c.Ledger.BusyTimeout)
	}
	tests := []struct {
		key, value string
	}{
		{"runtime.read_header_timeout", "0s"},
		{"runtime.read_header_timeout", "-1s"},
		{"runtime.read_timeout", "soon"},
		{"runtime.read_timeout", "0"},
		{"ledger.busy_timeout", "0s"},
		{"ledger.busy_timeout", "500us"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			c := Default()
			err := c.Set(tt.key, tt.value)
			if err == nil {
				err = c.Validate()
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.key {
				t.Errorf("Set(%q, %q) then Validate = %v, want a FieldError naming %s", tt.key, tt.value, err, tt.key)
			}
		})
	}
}
