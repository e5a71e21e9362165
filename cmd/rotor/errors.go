package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/internal/dburl"
	"github.com/rotorhq/rotor/ledger"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	// ExitUsage means the user must change the command or the setup: a bad
	// flag, a bad config key, a taken port, an unsafe token file.
	ExitUsage = 2
)

// UsageError is an error the user fixes by changing the command or the
// setup; it exits 2.
type UsageError struct {
	Err       error
	showUsage bool
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// usageErrorf returns a *UsageError.
func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// SilentError means the problem was already explained to the user; only the
// exit code remains.
type SilentError struct{ Code int }

func (e *SilentError) Error() string { return fmt.Sprintf("exit %d", e.Code) }

// exitCode maps an error to the process exit status in one place.
func exitCode(err error) int {
	var se *SilentError
	var ue *UsageError
	var fe *config.FieldError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &se):
		return se.Code
	case errors.As(err, &ue), errors.As(err, &fe), errors.Is(err, ledger.ErrSchemaTooOld), errors.Is(err, dburl.ErrURL),
		errors.Is(err, ledger.ErrNoFolder):
		return ExitUsage
	case errors.Is(err, ledger.ErrSchemaTooNew):
		return ExitError
	case errors.Is(err, context.Canceled):
		return ExitError
	}
	return ExitError
}
