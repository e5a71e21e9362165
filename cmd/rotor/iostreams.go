package main

import (
	"io"
	"os"
)

// IOStreams are the command's standard streams. Data goes to Out;
// diagnostics to ErrOut.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// IsTTY reports whether ErrOut is a terminal (text logs there, JSON
	// otherwise, unless configured).
	IsTTY bool
}

// DefaultIO returns the process's streams.
func DefaultIO() *IOStreams {
	tty := false
	if fi, err := os.Stderr.Stat(); err == nil {
		tty = fi.Mode()&os.ModeCharDevice != 0
	}
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, IsTTY: tty}
}
