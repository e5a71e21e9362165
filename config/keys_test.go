package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestEveryFieldRegisteredOnce: every field reachable from Config (through
// its sections, pools, credentials and model profiles) is set by exactly
// one table row, and every row points at such a field. A struct field
// without a row, or two rows for one field, fails here: adding a key is
// adding its field and its row, nothing else.
func TestEveryFieldRegisteredOnce(t *testing.T) {
	checkRegistered(t, settings)
	checkRegistered(t, poolFields)
	checkRegistered(t, credentialFields)
	checkRegistered(t, profileFields)
}

func checkRegistered[T any](t *testing.T, fields []field[T]) {
	t.Helper()
	var v T
	leaves := map[uintptr]string{}
	collectLeaves(reflect.ValueOf(&v).Elem(), reflect.TypeFor[T]().Name(), leaves)
	count := map[uintptr]int{}
	keys := map[string]bool{}
	for _, f := range fields {
		if keys[f.key] {
			t.Errorf("key %s registered twice", f.key)
		}
		keys[f.key] = true
		var ptrs []any
		if f.ptr != nil {
			ptrs = append(ptrs, f.ptr(&v))
		}
		if f.raw != nil {
			ptrs = append(ptrs, f.raw(&v))
		}
		if len(ptrs) == 0 && f.refuse == "" {
			t.Errorf("key %s sets nothing", f.key)
		}
		for _, p := range ptrs {
			a := reflect.ValueOf(p).Pointer()
			if _, ok := leaves[a]; !ok {
				t.Errorf("key %s points outside %T's fields", f.key, v)
			}
			count[a]++
		}
	}
	for a, name := range leaves {
		if count[a] != 1 {
			t.Errorf("%s is set by %d table rows, want 1", name, count[a])
		}
	}
}

// collectLeaves records the address of every field of the struct v,
// descending into nested structs (the file's sections).
func collectLeaves(v reflect.Value, name string, out map[uintptr]string) {
	for i := range v.NumField() {
		f, n := v.Field(i), name+"."+v.Type().Field(i).Name
		if f.Kind() == reflect.Struct {
			collectLeaves(f, n, out)
			continue
		}
		out[f.Addr().Pointer()] = n
	}
}

// sample returns a value, different from any default, for a field of p's
// type: as the file writes it, as a variable writes it, and as read.
func sample(p any) (file, env string, want any) {
	switch p.(type) {
	case *time.Duration:
		return "7m3s", "7m3s", 7*time.Minute + 3*time.Second
	case *string:
		return "sample-value", "sample-value", "sample-value"
	case *int64:
		return "4242", "4242", int64(4242)
	case *bool:
		return "true", "true", true
	case *[]string:
		return "[http://a.test, http://b.test]", "http://a.test, http://b.test", []string{"http://a.test", "http://b.test"}
	case *map[string][]string:
		return "{b: [m]}", "", map[string][]string{"b": {"m"}}
	case *map[string]ModelProfile:
		return "{m.v2: {supported_endpoints: [/v1/x]}}", "", map[string]ModelProfile{"m.v2": {SupportedEndpoints: []string{"/v1/x"}}}
	case *[]Credential:
		c := defaultsOf(credentialFields)
		c.Name = "n"
		return "[{name: n}]", "", []Credential{c}
	case *map[string]Pool:
		return "{zdr: {}}", "", map[string]Pool{PoolZDR: defaultsOf(poolFields)}
	}
	panic(fmt.Sprintf("no sample for %T", p))
}

// specSamples are valid values for the spec settings whose generic sample
// would be malformed (and so disable the feature).
var specSamples = map[string]string{
	"learned_cooldown.mode":    "shadow",
	"learned_cooldown.storage": "sqlite",
}

// nest writes a dotted key as YAML flow mappings: a.b, v -> {a: {b: v}}.
func nest(key, value string) string {
	parts := strings.Split(key, ".")
	s := value
	for i := len(parts) - 1; i >= 0; i-- {
		s = "{" + parts[i] + ": " + s + "}"
	}
	return s
}

// TestEveryKeyRoundTrips: every row's key reads from the file into its
// field, every key of Keys reads from a variable through Set, and every
// key appears in the starter (TestStarterParsesToDefaults checks its
// values).
func TestEveryKeyRoundTrips(t *testing.T) {
	var starter yaml.Node
	if err := yaml.Unmarshal(Starter, &starter); err != nil {
		t.Fatalf("starter: %v", err)
	}
	noEnv := func(string) (string, bool) { return "", false }
	for _, f := range settings {
		t.Run(f.key, func(t *testing.T) {
			d := Default()
			file, env, want := sample(f.ptr(&d))
			if s, ok := specSamples[f.key]; ok {
				file, want = s, s
			}
			c, err := ParseFile([]byte(nest(f.key, file)))
			if err != nil {
				t.Fatalf("file: %v", err)
			}
			c.ResolveSpec(noEnv, func(s, _ string) { t.Errorf("%s malformed", s) })
			if got := reflect.ValueOf(f.ptr(&c)).Elem().Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("file: got %#v, want %#v", got, want)
			}
			if f.override {
				c := Default()
				if err := c.Set(f.key, env); err != nil {
					t.Fatalf("Set: %v", err)
				}
				if got := reflect.ValueOf(f.ptr(&c)).Elem().Interface(); !reflect.DeepEqual(got, want) {
					t.Errorf("Set: got %#v, want %#v", got, want)
				}
			} else if err := d.Set(f.key, env); err == nil {
				t.Errorf("Set accepts %s, which Keys does not list", f.key)
			}
			if !hasPath(&starter, strings.Split(f.key, ".")) {
				t.Errorf("starter lacks %s", f.key)
			}
		})
	}
	for _, f := range poolFields {
		t.Run("pools.api."+f.key, func(t *testing.T) {
			p := defaultsOf(poolFields)
			file, _, want := sample(f.ptr(&p))
			c, err := ParseFile([]byte(nest("pools.api."+f.key, file)))
			if err != nil {
				t.Fatalf("file: %v", err)
			}
			p = c.Pools[PoolAPI]
			if got := reflect.ValueOf(f.ptr(&p)).Elem().Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("file: got %#v, want %#v", got, want)
			}
			if !hasPath(&starter, []string{"pools", PoolAPI, f.key}) {
				t.Errorf("starter lacks pools.api.%s", f.key)
			}
		})
	}
	example := starterExample(t)
	for _, f := range credentialFields {
		t.Run("credentials."+f.key, func(t *testing.T) {
			if f.ptr == nil {
				return // refused: TestParseFileErrorsNameTheKey
			}
			cr := defaultsOf(credentialFields)
			file, _, want := sample(f.ptr(&cr))
			c, err := ParseFile([]byte("pools: {api: {credentials: [" + nest(f.key, file) + "]}}"))
			if err != nil {
				t.Fatalf("file: %v", err)
			}
			cr = c.Pools[PoolAPI].Credentials[0]
			if got := reflect.ValueOf(f.ptr(&cr)).Elem().Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("file: got %#v, want %#v", got, want)
			}
			if f.example != "" && reflect.ValueOf(f.ptr(&example)).Elem().IsZero() {
				t.Errorf("the starter's example credential does not set %s", f.key)
			}
		})
	}
	for _, f := range profileFields {
		t.Run("model_profiles.m."+f.key, func(t *testing.T) {
			var prof ModelProfile
			file, _, want := sample(f.ptr(&prof))
			c, err := ParseFile([]byte("pools: {api: {credentials: [{model_profiles: {m: " + nest(f.key, file) + "}}]}}"))
			if err != nil {
				t.Fatalf("file: %v", err)
			}
			prof = c.Pools[PoolAPI].Credentials[0].ModelProfiles["m"]
			if got := reflect.ValueOf(f.ptr(&prof)).Elem().Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("file: got %#v, want %#v", got, want)
			}
		})
	}
}

// starterExample parses the starter's commented example credential.
func starterExample(t *testing.T) Credential {
	t.Helper()
	_, ex, ok := strings.Cut(string(Starter), "    # credentials:\n")
	if !ok {
		t.Fatal("the starter has no example credential")
	}
	var b strings.Builder
	b.WriteString("pools:\n  api:\n    credentials:\n")
	for _, l := range strings.Split(ex, "\n") {
		rest, ok := strings.CutPrefix(l, "    # ")
		if !ok {
			break
		}
		b.WriteString("    " + rest + "\n")
	}
	c, err := ParseFile([]byte(b.String()))
	if err != nil {
		t.Fatalf("example credential: %v\n%s", err, b.String())
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("example credential: %v\n%s", err, b.String())
	}
	return c.Pools[PoolAPI].Credentials[0]
}

// hasPath reports whether the YAML document has a mapping key at path.
func hasPath(n *yaml.Node, path []string) bool {
	if n.Kind == yaml.DocumentNode {
		return hasPath(n.Content[0], path)
	}
	if len(path) == 0 {
		return true
	}
	for i := 0; i+1 < len(n.Content) && n.Kind == yaml.MappingNode; i += 2 {
		if n.Content[i].Value == path[0] {
			return hasPath(n.Content[i+1], path[1:])
		}
	}
	return false
}
