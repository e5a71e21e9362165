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
