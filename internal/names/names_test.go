package names

import "testing"

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want bool
	}{
		{"simple", "team-a", true},
		{"dots and underscores", "ci.build_2", true},
		{"64 characters", "a123456789012345678901234567890123456789012345678901234567890123", true},
		{"65 characters", "a1234567890123456789012345678901234567890123456789012345678901234", false},
		{"empty", "", false},
		{"leading dash", "-a", false},
		{"leading dot", ".a", false},
		{"space", "team a", false},
		{"slash", "a/b", false},
		{"newline", "a\nb", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Valid(tc.in); got != tc.want {
				t.Errorf("Valid(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// OpenAIMethods is the Allow value a 405 carries: each served path with its
// methods, any stored response under /v1/responses/ with GET and DELETE, and
// nothing for paths rotor does not serve.
func TestOpenAIMethods(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/v1/responses", "POST"},
		{"/v1/chat/completions", "POST"},
		{"/v1/embeddings", "POST"},
		{"/v1/models", "GET"},
		{"/v1/responses/", "GET, DELETE"},
		{"/v1/responses/resp_123", "GET, DELETE"},
		{"/v1/responses/resp_123/input_items", "GET, DELETE"},
		{"/v1/responsesx", ""},
		{"/v1/models/gpt-x", ""},
		{"/v1/completions", ""},
		{"/", ""},
		{"", ""},
	} {
		if got := OpenAIMethods(tc.path); got != tc.want {
			t.Errorf("OpenAIMethods(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// Status and /v1/models list the pools api first, then zdr.
func TestPoolsOrder(t *testing.T) {
	if len(Pools) != 2 || Pools[0] != PoolAPI || Pools[1] != PoolZDR {
		t.Errorf("Pools = %q, want [api zdr]", Pools)
	}
}
