package dburl

import (
	"net/url"
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
		"postgres://x/y": true, "POSTGRESQL://x/y": true, "/home/me/.rotor/rotor.db": false, "rotor.db": false, "sqlite://x": false,
	} {
		if got := IsPostgres(in); got != want {
			t.Errorf("IsPostgres(%q) = %v, want %v", in, got, want)
		}
	}
}

func FuzzMask(f *testing.F) {
	for _, s := range []string{"postgres://a:pw@h/d?password=pw", "postgresql://h/d", "postgres://a:pw@h:x/d", "%%", "postgres://:0000@0000", "postgres://h/d?pass%77ord=pw"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := Mask(in)
		if !IsPostgres(in) {
			if got != in {
				t.Fatalf("Mask(%q) = %q changed a path", in, got)
			}
			return
		}
		u, err := url.Parse(in)
		if err != nil {
			if !strings.HasSuffix(got, "://xxxxx") {
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
