// Package dburl tells a PostgreSQL URL from a SQLite path, refuses a
// ledger location that is neither, and masks the passwords a location
// holds, for everything rotor prints of a ledger's database: logs, errors,
// status and config check.
//
// It imports no other rotor package (and no database driver), so its fuzz
// test builds without SQLite.
package dburl

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Sentinels every error of Check unwraps to.
var (
	// ErrSpace: the location is blank or has white space around it.
	ErrSpace = errors.New("white space")
	// ErrScheme: a URL of another scheme than postgres or postgresql.
	ErrScheme = errors.New("not a SQLite file or a postgres:// URL")
	// ErrKeywordValue: a libpq keyword/value string (host=... dbname=...).
	ErrKeywordValue = errors.New("a keyword/value connection string")
	// ErrURL: a postgres URL that does not parse, or whose parameters
	// the driver cannot use (pgledger.CheckURL).
	ErrURL = errors.New("a postgres URL that does not parse")
)

// Error is Check's error: a message naming the location masked, which
// unwraps to one of the sentinels above.
type Error struct {
	Kind error
	msg  string
}

func (e *Error) Error() string { return e.msg }
func (e *Error) Unwrap() error { return e.Kind }

// Errorf returns an *Error of kind with format's message, for a check of
// a location made elsewhere (pgledger.CheckURL, which reads a URL as the
// driver does).
func Errorf(kind error, format string, args ...any) error {
	return checkErr(kind, format, args...)
}

func checkErr(kind error, format string, args ...any) error {
	return &Error{Kind: kind, msg: fmt.Sprintf(format, args...)}
}

// scheme matches a URL scheme followed by ":/" (and so "://"): at least two
// characters, so that a Windows drive (C:/rotor.db) stays a path.
var scheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]+):/`)

// schemeOf returns s's URL scheme as written, or "" when s has none.
func schemeOf(s string) string {
	if m := scheme.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// IsPostgres reports whether target names a PostgreSQL database (a postgres://
// or postgresql:// URL, the scheme in any case) rather than a SQLite file.
func IsPostgres(target string) bool {
	l := strings.ToLower(target)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// Check validates target, a ledger's location as the user gave it (--db,
// ROTOR_DB, ledger.url, ledger copy --to, ledger backup FILE), and returns
// it ready to open: a postgres:// or postgresql:// URL with its scheme in
// lower case (the driver reads no other), or a SQLite file as it is. It
// refuses, with an error naming target masked, a blank target or one with
// white space around it (never trimmed: a file name may hold any byte, and
// a pasted value with a stray space is better fixed than guessed), a URL
// of any other scheme (mysql://, sqlite://, pgsql://, postgres:/x), a
// PostgreSQL keyword/value string (host=db dbname=rotor), which would
// otherwise be taken for a file name, and a postgres URL that does not
// parse. Callers prefix the error with where target came from.
func Check(target string) (string, error) {
	masked := Mask(target)
	switch t := strings.TrimSpace(target); {
	case target == "":
		return "", checkErr(ErrSpace, "give a SQLite file or a postgres:// URL, not an empty value")
	case t == "":
		return "", checkErr(ErrSpace, "give a SQLite file or a postgres:// URL, not white space")
	case t != target:
		return "", checkErr(ErrSpace, "%q has white space around it: remove it", masked)
	}
	if s := schemeOf(target); s != "" {
		ls := strings.ToLower(s)
		if ls != "postgres" && ls != "postgresql" {
			return "", checkErr(ErrScheme, "a ledger is a SQLite file or a postgres:// URL, not %q", masked)
		}
		rest := target[len(s)+1:]
		if !strings.HasPrefix(rest, "//") {
			return "", checkErr(ErrScheme, "a PostgreSQL URL starts with %s://, not %q", ls, masked)
		}
		target = ls + ":" + rest
		if _, err := url.Parse(target); err != nil {
			// url.Error repeats the URL, password and all, and its reason
			// quotes the piece it choked on ("invalid port \":S3cr\" after
			// host"), a password's start when it holds a / ? or # not
			// percent-encoded: name no piece of it.
			return "", checkErr(ErrURL, "%q does not parse as a URL: percent-encode any of @ : / ? # %% [ ] in its user name or password", masked)
		}
		if !sameUserInfo(rest[2:]) {
			return "", checkErr(ErrURL, "%q has an @ the PostgreSQL driver reads otherwise: percent-encode an @ in the user name or password as %%40", masked)
		}
		if atInPath(rest[2:]) {
			// Not quoted, even masked: the host may be part of the
			// password.
			return "", checkErr(ErrURL, "the postgres URL has an @ after its host, in the database name: percent-encode any of @ / ? # in the user name or password (a / there ends the host), or an @ in the database name as %%40")
		}
		return target, nil
	}
	if isKeywordValue(target) {
		return "", checkErr(ErrKeywordValue, "%q is a PostgreSQL keyword/value string, not a SQLite file: write it as a postgres:// URL, such as postgres://USER:PASSWORD@HOST:PORT/DBNAME?sslmode=verify-full",
			masked)
	}
	return target, nil
}

// sameUserInfo reports whether the PostgreSQL driver finds a URL's user
// info (p: what follows "//") where net/url does, and so where Mask and
// Passwords look for its password. pgx, as libpq, ends it at the first @
// before the first /; net/url at the last @ before the first /, ? or #.
// Read apart, the driver takes a shorter password and a host made of the
// password's tail, which its connection errors print past every mask.
// The two agree when that stretch holds one @ at most, before any ? or #.
func sameUserInfo(p string) bool {
	if i := strings.IndexByte(p, '/'); i >= 0 {
		p = p[:i]
	}
	at := strings.IndexByte(p, '@')
	if at < 0 {
		return true
	}
	return strings.Count(p, "@") == 1 && !strings.ContainsAny(p[:at], "?#")
}

// atInPath reports whether a URL's path (p: what follows "//") holds an
// @: a password holding a / not percent-encoded and then an @ (alice:
// S3/cr@db/rotor@host) reads, for net/url and the driver alike, as the
// password's head, a host made of its middle and a path holding the rest,
// so Mask hides only the head and the driver's connection errors print
// the host. No database name a user chose is likely to hold an @, and one
// that does can say %40.
func atInPath(p string) bool {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	i := strings.IndexByte(p, '/')
	return i >= 0 && strings.Contains(p[i:], "@")
}

// libpqKeywords are the keywords of a libpq connection string (and pgx's
// database and search_path): a value whose keys include one is such a
// string, never a file name.
var libpqKeywords = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "database": true, "user": true,
	"password": true, "passfile": true, "channel_binding": true, "connect_timeout": true,
	"client_encoding": true, "options": true, "application_name": true, "fallback_application_name": true,
	"keepalives": true, "keepalives_idle": true, "keepalives_interval": true, "keepalives_count": true,
	"tcp_user_timeout": true, "replication": true, "gssencmode": true, "sslmode": true, "requiressl": true,
	"sslnegotiation": true, "sslcompression": true, "sslcert": true, "sslkey": true, "sslpassword": true,
	"sslcertmode": true, "sslrootcert": true, "sslcrl": true, "sslcrldir": true, "sslsni": true,
	"requirepeer": true, "require_auth": true, "ssl_min_protocol_version": true, "ssl_max_protocol_version": true,
	"min_protocol_version": true, "max_protocol_version": true, "krbsrvname": true, "gsslib": true,
	"gssdelegation": true, "service": true, "target_session_attrs": true, "load_balance_hosts": true,
	"search_path": true,
}

// isKeywordValue reports whether s reads as a libpq keyword/value string:
// one of its keys, read as the driver reads them, is a libpq keyword (in any
// case). A file name such as /data/a=b.db has the key "/data/a" and stays a
// file.
func isKeywordValue(s string) bool {
	for _, p := range keywordValuePairs(s) {
		if libpqKeywords[strings.ToLower(p.key)] {
			return true
		}
	}
	return false
}

// pair is one key=value of a keyword/value string: key trimmed, and the
// value's bytes in the string, quotes included.
type pair struct {
	key        string
	start, end int
}

// keywordValuePairs splits s the way pgx's parseKeywordValueSettings does
// (pgconn/config.go, v5.12): a key runs to the next '=', then spaces, then a
// value: quoted with ' (\ escapes) or a run of non-spaces (\ escapes). It is
// lenient where pgx errs, so that Mask finds a password in a string pgx
// refuses too: an unterminated quote runs to the end, and a key holding
// white space ("x password") is read as its last word.
func keywordValuePairs(s string) []pair {
	var out []pair
	i := skipSpace(s, 0)
	for i < len(s) {
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			break
		}
		key := strings.TrimSpace(s[i : i+eq])
		if j := strings.LastIndexAny(key, " \t\n\r\v\f"); j >= 0 {
			key = key[j+1:]
		}
		start := skipSpace(s, i+eq+1)
		end := start
		if end < len(s) && s[end] == '\'' {
			for end++; end < len(s) && s[end] != '\''; end++ {
				if s[end] == '\\' {
					end++
				}
			}
			end = min(end+1, len(s)) // the closing quote
		} else {
			for ; end < len(s) && !isSpace(s[end]); end++ {
				if s[end] == '\\' {
					end++
				}
			}
			end = min(end, len(s))
		}
		out = append(out, pair{key: key, start: start, end: end})
		i = skipSpace(s, end)
	}
	return out
}

func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// Mask returns target with every password it holds replaced by "xxxxx".
// It is what rotor prints of a ledger's location, in logs, errors, status
// and config check, valid or not. In a URL (of any scheme) that is the user
// info's password and any password= parameter's; a URL it cannot parse is
// masked whole after its scheme, since it may still hold one, and a
// fragment (meaningless to PostgreSQL) is dropped. In anything else (a
// SQLite path, or a keyword/value string) it is the value of each password
// or sslpassword key; a path holding none is returned as it is. White space
// around target is kept.
func Mask(target string) string {
	core := strings.TrimSpace(target)
	if core == "" {
		return target
	}
	i := strings.Index(target, core)
	return target[:i] + maskCore(core) + target[i+len(core):]
}

func maskCore(target string) string {
	s := schemeOf(target)
	if s == "" {
		return maskKeywordValue(target)
	}
	rest := target[len(s)+1:]
	if !strings.HasPrefix(rest, "//") {
		// No authority: postgres:/u:pw@h is a mistyped URL that may
		// hold a password.
		if strings.Contains(rest, "@") {
			return s + ":xxxxx"
		}
	}
	u, err := url.Parse(target)
	if err != nil {
		if strings.HasPrefix(rest, "//") {
			return s + "://xxxxx"
		}
		return s + ":xxxxx"
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

// maskKeywordValue replaces the value of each password key of a
// keyword/value string; a string with none (a SQLite path) is returned as
// it is.
func maskKeywordValue(s string) string {
	var b strings.Builder
	last := 0
	for _, p := range keywordValuePairs(s) {
		if !isPasswordKeyword(p.key) || p.end == p.start {
			continue
		}
		b.WriteString(s[last:p.start])
		if s[p.start] == '\'' {
			// Quoted, so that a key right after the closing quote
			// (password='pw'host=db) stays a key.
			b.WriteString("'xxxxx'")
		} else {
			b.WriteString("xxxxx")
		}
		last = p.end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// isPasswordKeyword reports whether a keyword/value key is one of libpq's
// two passwords (password, sslpassword), in any case.
func isPasswordKeyword(k string) bool {
	k = strings.ToLower(k)
	return k == "password" || k == "sslpassword"
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

var passwordParamValue = regexp.MustCompile(`(?i)(?:^|[?&])[^&=#]*password=([^&#]*)`)

// Passwords returns the passwords target holds, raw and decoded, to take
// out of a message that may quote them (a driver's error): the user
// info's and password parameters' of a URL, parsable or not, and the
// password keys' values of a keyword/value string.
func Passwords(target string) []string {
	var out []string
	add := func(s string) {
		if s != "" && s != "xxxxx" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	target = strings.TrimSpace(target)
	s := schemeOf(target)
	if s == "" {
		for _, p := range keywordValuePairs(target) {
			if isPasswordKeyword(p.key) {
				v := target[p.start:p.end]
				add(v)
				add(unescape(strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'")))
			}
		}
		return out
	}
	rest := strings.TrimPrefix(target[len(s)+1:], "//")
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
			add(pw)
			if d, err := url.PathUnescape(pw); err == nil {
				add(d)
			}
		}
	}
	for _, m := range passwordParamValue.FindAllStringSubmatch(target, -1) {
		add(m[1])
		if d, err := url.QueryUnescape(m[1]); err == nil {
			add(d)
		}
	}
	return out
}

// unescape drops each backslash and keeps the byte it escapes, as pgx
// reads a keyword/value string's value.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			if i++; i == len(s) {
				break
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
