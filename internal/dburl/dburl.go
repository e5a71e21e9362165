// Package dburl tells a PostgreSQL URL from a SQLite path and masks the
// passwords a URL holds, for everything rotor prints of a ledger's
// database: logs, errors, status and config check.
//
// It imports no other rotor package (and no database driver), so its fuzz
// test builds without SQLite.
package dburl

import (
	"net/url"
	"strings"
)

// IsPostgres reports whether target names a PostgreSQL database (a postgres://
// or postgresql:// URL) rather than a SQLite file.
func IsPostgres(target string) bool {
	l := strings.ToLower(target)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// Mask returns target with every password it holds replaced by "xxxxx":
// the user info's and any password= parameter's. It is what rotor prints of
// a database URL, in logs, errors, status and config check. A URL it cannot
// parse is masked whole after its scheme, since it may still hold one; a
// fragment (meaningless to PostgreSQL) is dropped. Anything but a
// PostgreSQL URL (a SQLite path) is returned as it is.
func Mask(target string) string {
	if !IsPostgres(target) {
		return target
	}
	u, err := url.Parse(target)
	if err != nil {
		if i := strings.Index(target, "://"); i >= 0 {
			return target[:i+3] + "xxxxx"
		}
		return "xxxxx"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	u.Fragment, u.RawFragment = "", ""
	u.RawQuery = maskQuery(u.RawQuery)
	return u.String()
}

// maskQuery replaces the value of every password parameter in a raw query
// (password, and sslpassword: the passphrase of an encrypted client key,
// which pgx reads from the URL too), however its key is written: any case,
// percent-encoded or not. A key that does not decode has its value masked
// too, since it might be one.
func maskQuery(raw string) string {
	if raw == "" {
		return raw
	}
	parts := strings.Split(raw, "&")
	for i, part := range parts {
		key, _, hasValue := strings.Cut(part, "=")
		k, err := url.QueryUnescape(key)
		if hasValue && (err != nil || isPasswordKey(k)) {
			parts[i] = key + "=xxxxx"
		}
	}
	return strings.Join(parts, "&")
}

// isPasswordKey reports whether a query key names a password.
func isPasswordKey(k string) bool {
	return strings.HasSuffix(strings.ToLower(k), "password")
}
