package main

import (
	"context"
	"strings"

	"github.com/rotorhq/rotor/internal/dburl"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/ledger/pgledger"
)

// openPostgres opens the PostgreSQL ledger at dbURL; it never migrates.
func openPostgres(ctx context.Context, dbURL string, opts pgledger.Options) (ledger.Ledger, error) {
	s, err := pgledger.Open(ctx, dbURL, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// migratePostgres migrates the PostgreSQL ledger at dbURL under the
// engine's advisory lock and returns the schema versions before and after.
func migratePostgres(ctx context.Context, dbURL string, opts pgledger.Options) (from, to int, err error) {
	return pgledger.Migrate(ctx, dbURL, opts)
}

// maskedError is an error whose message had a database password taken
// out; errors.Is and As still see the error it wraps.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// maskErr returns err with dbURL's passwords taken out of its message
// (nil stays nil). A backstop: the engines name the database masked
// already.
func maskErr(err error, dbURL string) error {
	if err == nil || dbURL == "" {
		return err
	}
	msg := scrubURL(err.Error(), dbURL)
	if msg == err.Error() {
		return err
	}
	return &maskedError{msg: msg, err: err}
}

// scrubURL replaces dbURL, and each password it holds, in msg by the
// masked URL and "xxxxx". It takes any ledger location, valid or not: a
// SQLite path (which holds none), a PostgreSQL URL, or a value rotor
// refuses (another scheme's URL, a keyword/value string).
func scrubURL(msg, dbURL string) string {
	if dbURL == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, dbURL, dburl.Mask(dbURL))
	for _, pw := range dburl.Passwords(dbURL) {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return msg
}

// dbURL returns the ledger's database for masking, or "" when it cannot be
// resolved (a bad configuration: then nothing was opened).
func (f *Factory) dbURL() string {
	if f.DBPath == nil {
		return ""
	}
	path, err := f.DBPath()
	if err != nil {
		return ""
	}
	return path
}
