package main

import (
	"context"
	"net/url"
	"regexp"
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

// maskErr returns err with dbURL's password taken out of its message (nil
// stays nil). A backstop: the engines name the database masked already.
func maskErr(err error, dbURL string) error {
	if err == nil || !dburl.IsPostgres(dbURL) {
		return err
	}
	msg := scrubURL(err.Error(), dbURL)
	if msg == err.Error() {
		return err
	}
	return &maskedError{msg: msg, err: err}
}

var passwordParamValue = regexp.MustCompile(`(?i)(?:^|[?&])password=([^&#]*)`)

// scrubURL replaces dbURL, and each password it holds, in msg by the
// masked URL and "xxxxx".
func scrubURL(msg, dbURL string) string {
	if !dburl.IsPostgres(dbURL) {
		return msg
	}
	msg = strings.ReplaceAll(msg, dbURL, dburl.Mask(dbURL))
	for _, pw := range urlPasswords(dbURL) {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return msg
}

// urlPasswords returns the passwords dbURL holds, raw and decoded.
func urlPasswords(dbURL string) []string {
	var out []string
	add := func(s string) {
		if s != "" && s != "xxxxx" {
			out = append(out, s)
		}
	}
	if i := strings.Index(dbURL, "://"); i >= 0 {
		rest := dbURL[i+3:]
		if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				add(pw)
				if d, err := url.PathUnescape(pw); err == nil {
					add(d)
				}
			}
		}
	}
	for _, m := range passwordParamValue.FindAllStringSubmatch(dbURL, -1) {
		add(m[1])
		if d, err := url.QueryUnescape(m[1]); err == nil {
			add(d)
		}
	}
	return out
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
