package pgledger

import (
	"net/url"
	"regexp"
	"strings"
)

// IsURL reports whether target names a PostgreSQL database (a postgres://
// or postgresql:// URL) rather than a SQLite file.
func IsURL(target string) bool {
	l := strings.ToLower(target)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// passwordParam matches a password= query parameter's value.
var passwordParam = regexp.MustCompile(`(?i)((?:^|[?&])password=)[^&#]*`)

// MaskURL returns target with every password it holds replaced by "xxxxx":
// the user info's and any password= parameter's. It is what rotor prints of
// a database URL, in logs, errors, status and config check. A URL it cannot
// parse is masked whole after its scheme, since it may still hold one; a
// fragment (meaningless to PostgreSQL) is dropped. Anything but a
// PostgreSQL URL (a SQLite path) is returned as it is.
func MaskURL(target string) string {
	if !IsURL(target) {
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
	s := u.String()
	if u.RawQuery != "" {
		i := strings.IndexByte(s, '?')
		s = s[:i] + passwordParam.ReplaceAllString(s[i:], "${1}xxxxx")
	}
	return s
}
