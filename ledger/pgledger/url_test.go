package pgledger

import (
	"net/url"
	"strings"
	"testing"
)

func TestMaskURLHidesEveryPassword(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://postgres@127.0.0.1:5432/test", "postgres://postgres@127.0.0.1:5432/test"},
		{"postgres://alice:s3cret@db.example:5432/rotor?sslmode=require", "postgres://alice:xxxxx@db.example:5432/rotor?sslmode=require"},
		{"postgresql://alice@db/rotor?sslmode=verify-full&password=s3cret", "postgresql://alice@db/rotor?sslmode=verify-full&password=xxxxx"},
		{"postgres://db/rotor?PASSWORD=s3cret&user=bob", "postgres://db/rotor?PASSWORD=xxxxx&user=bob"},
		{"postgres://alice:s3cret@db:bad-port/x", "postgres://xxxxx"},
		{"postgres://db/rotor#password=s3cret", "postgres://db/rotor"},
		{"/home/alice/.rotor/rotor.db", "/home/alice/.rotor/rotor.db"},
	} {
		got := MaskURL(tc.in)
		if got != tc.want {
			t.Errorf("MaskURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("MaskURL(%q) leaks the password: %q", tc.in, got)
		}
	}
}

func TestIsURL(t *testing.T) {
	for in, want := range map[string]bool{
		"postgres://x/y": true, "POSTGRESQL://x/y": true, "/home/me/.rotor/rotor.db": false, "rotor.db": false, "sqlite://x": false,
	} {
		if got := IsURL(in); got != want {
			t.Errorf("IsURL(%q) = %v, want %v", in, got, want)
		}
	}
}

func FuzzMaskURL(f *testing.F) {
	for _, s := range []string{"postgres://a:pw@h/d?password=pw", "postgresql://h/d", "postgres://a:pw@h:x/d", "%%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := MaskURL(in)
		if !IsURL(in) {
			if got != in {
				t.Fatalf("MaskURL(%q) = %q changed a path", in, got)
			}
			return
		}
		u, err := url.Parse(in)
		if err != nil {
			if !strings.HasSuffix(got, "://xxxxx") {
				t.Fatalf("MaskURL(%q) = %q, unparsable URL not masked whole", in, got)
			}
			return
		}
		var secrets []string
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
		for k, vs := range u.Query() {
			if strings.EqualFold(k, "password") {
				secrets = append(secrets, vs...)
			}
		}
		for _, pw := range secrets {
			if len(pw) >= 4 && strings.Contains(got, pw) && !strings.Contains("xxxxx", pw) {
				t.Fatalf("MaskURL(%q) = %q keeps the password %q", in, got, pw)
			}
		}
	})
}
