package dburl

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestMaskHidesEveryPassword(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://postgres@127.0.0.1:5432/test", "postgres://postgres@127.0.0.1:5432/test"},
		{"postgres://alice:s3cret@db.example:5432/rotor?sslmode=require", "postgres://alice:xxxxx@db.example:5432/rotor?sslmode=require"},
		{"postgresql://alice@db/rotor?sslmode=verify-full&password=s3cret", "postgresql://alice@db/rotor?sslmode=verify-full&password=xxxxx"},
		{"postgres://db/rotor?PASSWORD=s3cret&user=bob", "postgres://db/rotor?PASSWORD=xxxxx&user=bob"},
		{"postgres://alice:s3cret@db:bad-port/x", "postgres://xxxxx"},
		{"postgres://db/rotor#password=s3cret", "postgres://db/rotor"},
		{"postgres://db/rotor?pass%77ord=s3cret&sslmode=disable", "postgres://db/rotor?pass%77ord=xxxxx&sslmode=disable"},
		{"postgres://:0000@0000", "postgres://:xxxxx@0000"},
		{"postgres://db/rotor?sslmode=verify-full&sslkey=/k.pem&sslpassword=s3cret", "postgres://db/rotor?sslmode=verify-full&sslkey=/k.pem&sslpassword=xxxxx"},
		{"postgres://db/rotor?SSLPassword=s3cret", "postgres://db/rotor?SSLPassword=xxxxx"},
		{"/home/alice/.rotor/rotor.db", "/home/alice/.rotor/rotor.db"},
		{"/data/a=b.db", "/data/a=b.db"},
		{`C:\rotor\rotor.db`, `C:\rotor\rotor.db`},
		// Not a ledger, but printed when refused: masked all the same.
		{"host=db.example user=rotor password=s3cret dbname=rotor", "host=db.example user=rotor password=xxxxx dbname=rotor"},
		{"host=db password = 's3 cret' dbname=rotor", "host=db password = 'xxxxx' dbname=rotor"},
		{"password='s3cret'host=db", "password='xxxxx'host=db"},
		{`host=db sslpassword=s3\ cret`, "host=db sslpassword=xxxxx"},
		{"host=db PASSWORD='s3cret", "host=db PASSWORD='xxxxx'"},
		// An empty password at the very end has nothing to hide.
		{"host=db dbname=rotor password=", "host=db dbname=rotor password="},
		{" postgres://alice:s3cret@db/rotor ", " postgres://alice:xxxxx@db/rotor "},
		{"POSTGRES://alice:s3cret@db/rotor", "postgres://alice:xxxxx@db/rotor"},
		{"mysql://alice:s3cret@db/rotor?password=s3cret", "mysql://alice:xxxxx@db/rotor?password=xxxxx"},
		{"pgsql://alice:s3cret@db/rotor", "pgsql://alice:xxxxx@db/rotor"},
		{"postgres:/alice:s3cret@db/rotor", "postgres:xxxxx"},
		{"postgresql://alice:s3cret@[::1", "postgresql://xxxxx"},
	} {
		got := Mask(tc.in)
		if got != tc.want {
			t.Errorf("Mask(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("Mask(%q) leaks the password: %q", tc.in, got)
		}
	}
}

func TestIsPostgres(t *testing.T) {
	for in, want := range map[string]bool{
		"postgres://x/y": true, "POSTGRESQL://x/y": true, " postgres://x/y": false, "postgres:/x": false, "pgsql://x/y": false, "/home/me/.rotor/rotor.db": false, "rotor.db": false, "sqlite://x": false,
	} {
		if got := IsPostgres(in); got != want {
			t.Errorf("IsPostgres(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{"/home/alice/.config/rotor/rotor.db", "/home/alice/.config/rotor/rotor.db", nil},
		{"rotor.db", "rotor.db", nil},
		{"/data/a=b.db", "/data/a=b.db", nil},
		{"my ledger.db", "my ledger.db", nil},
		{`C:\rotor\rotor.db`, `C:\rotor\rotor.db`, nil},
		{"C:/rotor/rotor.db", "C:/rotor/rotor.db", nil},
		{"postgres://alice:s3cret@db/rotor?sslmode=require", "postgres://alice:s3cret@db/rotor?sslmode=require", nil},
		{"postgresql://db/rotor", "postgresql://db/rotor", nil},
		{"POSTGRES://alice:s3cret@db/rotor", "postgres://alice:s3cret@db/rotor", nil},
		{"PostgreSQL://db/rotor", "postgresql://db/rotor", nil},
		{"", "", ErrSpace},
		{" ", "", ErrSpace},
		{" postgres://alice:s3cret@db/rotor", "", ErrSpace},
		{"rotor.db\n", "", ErrSpace},
		{"mysql://alice:s3cret@db/rotor", "", ErrScheme},
		{"pgsql://alice:s3cret@db/rotor", "", ErrScheme},
		{"sqlite:///tmp/rotor.db", "", ErrScheme},
		{"file:/tmp/rotor.db", "", ErrScheme},
		{"postgres:/x", "", ErrScheme},
		{"postgres:/alice:s3cret@db/rotor", "", ErrScheme},
		{"host=db.example user=rotor password=s3cret dbname=rotor", "", ErrKeywordValue},
		{"dbname=rotor", "", ErrKeywordValue},
		{"application_name=x HOST=db password='s3cret'", "", ErrKeywordValue},
		{"HOST=db DBNAME=rotor", "", ErrKeywordValue},
		{"dbname=rotor password=", "", ErrKeywordValue},
		{"postgresql://alice:s3cret@[::1", "", ErrURL},
		{"postgres://alice:s3cret@db:port/rotor", "", ErrURL},
	} {
		got, err := Check(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("Check(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Check(%q) leaks the password: %v", tc.in, err)
		}
	}
}

// An empty value and a blank one are told apart: an empty --db is not white
// space.
func TestCheckSaysEmptyOrWhiteSpace(t *testing.T) {
	for in, want := range map[string]string{"": "not an empty value", "  ": "not white space", "\t": "not white space"} {
		_, err := Check(in)
		if !errors.Is(err, ErrSpace) || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v, want ErrSpace saying %q", in, err, want)
		}
	}
}

func TestPasswords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"/home/alice/rotor.db", nil},
		{"postgres://alice:s3%40cret@db/rotor?sslpassword=k%20ey", []string{"s3%40cret", "s3@cret", "k%20ey", "k ey"}},
		{"postgresql://alice:s3cret@[::1", []string{"s3cret"}},
		{`host=db password='s3 \'cret' sslpassword=k\ ey`, []string{`'s3 \'cret'`, "s3 'cret", `k\ ey`, "k ey"}},
		{`host=db password=s3cret\`, []string{`s3cret\`, "s3cret"}},
	} {
		if got := Passwords(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Passwords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// keywordValues parses s as pgx v5.12 parses a keyword/value string
// (pgconn parseKeywordValueSettings), strictly: the fuzz test's oracle.
func keywordValues(s string) (map[string]string, bool) {
	out := map[string]string{}
	const space = " \t\n\r\v\f"
	s = strings.TrimLeft(s, space)
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, false
		}
		key := strings.Trim(s[:eq], space)
		if key == "" || strings.ContainsAny(key, space) {
			return nil, false
		}
		s = strings.TrimLeft(s[eq+1:], space)
		var val string
		switch {
		case s == "":
		case s[0] != '\'':
			end := 0
			for ; end < len(s) && !strings.ContainsRune(space, rune(s[end])); end++ {
				if s[end] == '\\' {
					if end++; end == len(s) {
						break
					}
				}
			}
			val, s = s[:end], strings.TrimLeft(s[end:], space)
		default:
			s = s[1:]
			end := 0
			for ; end < len(s) && s[end] != '\''; end++ {
				if s[end] == '\\' {
					end++
				}
			}
			if end >= len(s) {
				return nil, false
			}
			val, s = s[:end], strings.TrimLeft(s[end+1:], space)
		}
		out[key] = val
	}
	return out, true
}

func FuzzMask(f *testing.F) {
	for _, s := range []string{"postgres://a:pw@h/d?password=pw", "postgresql://h/d", "postgres://a:pw@h:x/d", "%%", "postgres://:0000@0000", "postgres://h/d?pass%77ord=pw",
		"host=h user=u password=pw dbname=d", "password='p w'host=h", `sslpassword=p\ w`, "host=h password='pw", " postgres://a:pw@h/d ", "POSTGRES://a:pw@h/d",
		"mysql://a:pw@h/d", "postgres:/a:pw@h/d", "postgresql://a:pw@[::1", "/data/a=b.db", `C:\x\password=pw`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := Mask(in)
		core := strings.TrimSpace(in)
		i := strings.Index(in, core)
		if core == "" || !strings.HasPrefix(got, in[:i]) || !strings.HasSuffix(got, in[i+len(core):]) {
			if got != in && core == "" {
				t.Fatalf("Mask(%q) = %q changed a blank value", in, got)
			}
			if core != "" {
				t.Fatalf("Mask(%q) = %q lost the white space around it", in, got)
			}
			return
		}
		in, got = core, strings.TrimSuffix(strings.TrimPrefix(got, in[:i]), in[i+len(core):])
		if schemeOf(in) == "" {
			// A path, or a keyword/value string.
			if got != in && !strings.Contains(strings.ToLower(in), "password") {
				t.Fatalf("Mask(%q) = %q changed a path", in, got)
			}
			kv, ok := keywordValues(in)
			if !ok {
				return
			}
			mkv, ok := keywordValues(got)
			if !ok || len(mkv) != len(kv) {
				t.Fatalf("Mask(%q) = %q: keywords %q, were %q", in, got, mkv, kv)
			}
			for k, v := range kv {
				mv, ok := mkv[k]
				switch {
				case !ok:
					t.Fatalf("Mask(%q) = %q lost the key %q", in, got, k)
				case isPasswordKeyword(k) && v != "" && mv != "xxxxx":
					t.Fatalf("Mask(%q) = %q keeps the password %s=%q", in, got, k, mv)
				case !isPasswordKeyword(k) && mv != v:
					t.Fatalf("Mask(%q) = %q changed %s=%q to %q", in, got, k, v, mv)
				}
			}
			return
		}
		u, err := url.Parse(in)
		if err != nil || (!strings.HasPrefix(in[len(schemeOf(in))+1:], "//") && strings.Contains(in, "@")) {
			if !strings.HasSuffix(got, ":xxxxx") && !strings.HasSuffix(got, "://xxxxx") {
				t.Fatalf("Mask(%q) = %q, unparsable URL not masked whole", in, got)
			}
			return
		}
		// The oracle is structural: the masked URL, parsed the way pgx
		// parses it, holds no password but the mask. (A password may
		// legitimately also spell part of the host or path.)
		m, err := url.Parse(got)
		if err != nil {
			t.Fatalf("Mask(%q) = %q does not parse: %v", in, got, err)
		}
		if p, ok := m.User.Password(); ok && p != "xxxxx" {
			t.Fatalf("Mask(%q) = %q keeps the password %q", in, got, p)
		}
		if _, had := u.User.Password(); had {
			if _, ok := m.User.Password(); !ok {
				t.Fatalf("Mask(%q) = %q lost the user info's shape", in, got)
			}
		}
		q, _ := url.ParseQuery(m.RawQuery)
		for k, vs := range q {
			for _, v := range vs {
				// An empty value ("?password") hides nothing.
				if strings.HasSuffix(strings.ToLower(k), "password") && v != "" && v != "xxxxx" {
					t.Fatalf("Mask(%q) = %q keeps the password parameter %q", in, got, v)
				}
			}
		}
		if m.Fragment != "" {
			t.Fatalf("Mask(%q) = %q keeps a fragment", in, got)
		}
	})
}

// A password holding a character a URL reserves (/ ? # or a bad %
// escape), not percent-encoded, makes the URL unparsable; Check's error
// quotes no part of it (url.Parse's reason does: `invalid port ":S3cr"
// after host`).
func TestCheckErrorQuotesNoPartOfThePassword(t *testing.T) {
	for _, in := range []string{
		"postgres://alice:S3cr/etPW@db.example:5432/rotor",
		"postgres://alice:S3cr?etPW@db.example:5432/rotor",
		"postgres://alice:S3cr#etPW@db.example/rotor",
		"postgresql://alice:S3cr%zzPW@db.example/rotor",
	} {
		_, err := Check(in)
		if !errors.Is(err, ErrURL) {
			t.Fatalf("Check(%q) = %v, want ErrURL", in, err)
		}
		for _, part := range []string{"S3cr", "etPW", "zzPW", "%zz"} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("Check(%q) error quotes part of the password (%q): %v", in, part, err)
			}
		}
	}
}

// pgx ends a URL's user info at the first @ before the first /, as libpq
// does; net/url, which Mask and Passwords use, at the last @. A password
// holding an @ not percent-encoded is read by the driver as a shorter
// password and a host made of the password's tail, which its connection
// error prints ("lookup etPW@127.0.0.1: no such host") past every mask:
// Check refuses such a URL, and takes the same password encoded.
func TestCheckRefusesUserInfoTheDriverReadsOtherwise(t *testing.T) {
	for _, in := range []string{
		"postgres://postgres:S3cr@etPW@127.0.0.1:5432/test",
		"postgres://postgres:S3cr@etPW@127.0.0.1",
		"postgres://127.0.0.1?password=S3cr@etPW",
		// A / before the @ ends the host inside the password: its middle
		// would be the host, the rest the database name.
		"postgres://postgres:S3cr@etPW/mid@127.0.0.1:5432/test",
		"postgres://postgres:S3cr@etPW:5432/a@127.0.0.1/test",
	} {
		if got, err := Check(in); !errors.Is(err, ErrURL) {
			t.Errorf("Check(%q) = %q, %v; want ErrURL", in, got, err)
		} else if strings.Contains(err.Error(), "S3cr") || strings.Contains(err.Error(), "etPW") {
			t.Errorf("Check(%q) leaks the password: %v", in, err)
		}
	}
	for _, in := range []string{
		"postgres://postgres:S3cr%40etPW@127.0.0.1:5432/test",
		"postgres://127.0.0.1/test?password=S3cr@etPW",
		"postgres://alice@db/rotor?application_name=a@b",
		"postgres://alice:pw@[::1]:5432/rotor",
	} {
		if _, err := Check(in); err != nil {
			t.Errorf("Check(%q): %v", in, err)
		}
	}
}
