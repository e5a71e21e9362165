package config

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rotorhq/rotor/internal/dur"
)

// MaxFileSize bounds the configuration file rotor will parse.
const MaxFileSize = 1 << 20

// ParseFile parses a rotor.yaml over the defaults. It is strict: unknown
// keys, duplicate keys, wrong types and inline api_key values are errors that
// name the key. It does not call Validate.
func ParseFile(data []byte) (Config, error) {
	c := Default()
	if len(data) > MaxFileSize {
		return c, fieldErr("(file)", "larger than %d bytes", MaxFileSize)
	}
	if Blank(data) {
		return c, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return c, &FieldError{Field: "(file)", Err: cleanYAMLError(err)}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return c, fieldErr("(file)", "want one YAML document")
	}
	if err := decode(settings, doc.Content[0], "", &c); err != nil {
		return c, err
	}
	return c, nil
}

// Blank reports whether data holds no YAML at all: only white space and
// comments (a file whose every line is commented out), which means the
// defaults, as an empty file does.
func Blank(data []byte) bool {
	for line := range bytes.Lines(data) {
		if l := bytes.TrimSpace(line); len(l) != 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

func cleanYAMLError(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

type entry struct {
	key  string
	val  *yaml.Node
	line int
}

// alias refuses a YAML alias (*name) where field wants a value: rotor's
// walker reads the schema node by node, and following aliases there would
// let a small file expand without bound (a list of aliases to a long
// list), which yaml's own decoder guards against and this walker does not.
func alias(n *yaml.Node, field string) error {
	if n.Kind != yaml.AliasNode {
		return nil
	}
	return fieldErr(field, "is the YAML alias *%s (line %d): rotor reads no aliases, write the value out", n.Value, n.Line)
}

func mapping(n *yaml.Node, path string) ([]entry, error) {
	if err := alias(n, orFile(path)); err != nil {
		return nil, err
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fieldErr(orFile(path), "want a mapping (line %d)", n.Line)
	}
	seen := map[string]bool{}
	out := make([]entry, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode {
			return nil, fieldErr(orFile(path), "keys must be strings (line %d)", k.Line)
		}
		if seen[k.Value] {
			return nil, fieldErr(join(path, k.Value), "duplicate key (line %d)", k.Line)
		}
		seen[k.Value] = true
		out = append(out, entry{key: k.Value, val: n.Content[i+1], line: k.Line})
	}
	return out, nil
}

func orFile(p string) string {
	if p == "" {
		return "(file)"
	}
	return p
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func unknown(path string, e entry) error {
	return fieldErr(join(path, e.key), "unknown key (line %d)", e.line)
}

// malformedSpecValue stands for a spec setting's value that is no single
// value (a YAML list or mapping): no mode, boolean, number, backend or JSON
// policy parses it.
const malformedSpecValue = "\x00"

func scalar(n *yaml.Node, field string) (string, error) {
	if err := alias(n, field); err != nil {
		return "", err
	}
	if n.Kind != yaml.ScalarNode {
		return "", fieldErr(field, "want a single value (line %d)", n.Line)
	}
	if n.Tag == "!!null" {
		return "", nil
	}
	return n.Value, nil
}

func durValue(n *yaml.Node, field string, p *time.Duration) error {
	s, err := scalar(n, field)
	if err != nil {
		return err
	}
	d, err := dur.Parse(s)
	if err != nil {
		return &FieldError{Field: field, Err: fmt.Errorf("%v (line %d)", err, n.Line)}
	}
	*p = d
	return nil
}

func boolValue(n *yaml.Node, field string, p *bool) error {
	s, err := scalar(n, field)
	if err != nil {
		return err
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fieldErr(field, "want true or false, not %q (line %d)", s, n.Line)
	}
	*p = b
	return nil
}

func strValue(n *yaml.Node, field string, p *string) error {
	s, err := scalar(n, field)
	if err != nil {
		return err
	}
	*p = s
	return nil
}

func strList(n *yaml.Node, field string) ([]string, error) {
	if err := alias(n, field); err != nil {
		return nil, err
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, fieldErr(field, "want a list (line %d)", n.Line)
	}
	var out []string
	for i, item := range n.Content {
		s, err := scalar(item, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// decode reads the mapping n, found at path, into dst by the table fields.
func decode[T any](fields []field[T], n *yaml.Node, path string, dst *T) error {
	return decodeSection(fields, n, path, "", dst)
}

// decodeSection reads the mapping of section (a prefix of the fields'
// dotted keys, "" for the top) at path.
func decodeSection[T any](fields []field[T], n *yaml.Node, path, section string, dst *T) error {
	at := path
	if section != "" {
		at = join(path, section)
	}
	es, err := mapping(n, at)
	if err != nil {
		return err
	}
	for _, e := range es {
		key := join(section, e.key)
		name := join(path, key)
		f := lookup(fields, key)
		switch {
		case strings.Contains(e.key, "."):
			// A dotted key is a path in the table, never a key in the file.
			err = unknown(at, e)
		case f != nil && f.refuse != "":
			err = fieldErr(name, f.refuse, e.line)
		case f != nil && f.raw != nil:
			// A spec setting: a list or mapping where it wants one value is
			// malformed, which ResolveSpec (or the policy parser) warns
			// about and which disables its feature; never a fatal error.
			s := malformedSpecValue
			if err = alias(e.val, name); err != nil {
				break
			}
			if e.val.Kind == yaml.ScalarNode {
				s, _ = scalar(e.val, name)
			}
			*f.raw(dst) = &s
		case f != nil:
			err = decodeValue(e.val, name, f.ptr(dst), f.clean)
		case isSection(fields, key):
			err = decodeSection(fields, e.val, path, key, dst)
		default:
			err = unknown(at, e)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func lookup[T any](fields []field[T], key string) *field[T] {
	for i := range fields {
		if fields[i].key == key {
			return &fields[i]
		}
	}
	return nil
}

func isSection[T any](fields []field[T], key string) bool {
	for _, f := range fields {
		if strings.HasPrefix(f.key, key+".") {
			return true
		}
	}
	return false
}

// decodeValue reads n into p by p's type.
func decodeValue(n *yaml.Node, field string, p any, clean func(string) string) (err error) {
	switch p := p.(type) {
	case *time.Duration:
		return durValue(n, field, p)
	case *bool:
		return boolValue(n, field, p)
	case *string:
		if err := strValue(n, field, p); err != nil {
			return err
		}
		if clean != nil {
			*p = clean(*p)
		}
	case *int64:
		s, err := scalar(n, field)
		if err != nil {
			return err
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fieldErr(field, "want an integer, not %q (line %d)", s, n.Line)
		}
		*p = v
	case *[]string:
		*p, err = strList(n, field)
	case *map[string]Pool:
		return pools(n, field, *p)
	case *map[string][]string:
		*p, err = buckets(n, field)
	case *[]Credential:
		*p, err = credentials(n, field)
	case *map[string]ModelProfile:
		*p, err = profiles(n, field)
	default:
		panic(fmt.Sprintf("config: %s has a type the file walker does not read: %T", field, p))
	}
	return err
}

func pools(n *yaml.Node, field string, out map[string]Pool) error {
	es, err := mapping(n, field)
	if err != nil {
		return err
	}
	for _, e := range es {
		base := join(field, e.key)
		if e.key != PoolAPI && e.key != PoolZDR {
			return fieldErr(base, "unknown pool (pools are api and zdr, one per model prefix) (line %d)", e.line)
		}
		pool := defaultsOf(poolFields)
		if err := decode(poolFields, e.val, base, &pool); err != nil {
			return err
		}
		out[e.key] = pool
	}
	return nil
}

func buckets(n *yaml.Node, field string) (map[string][]string, error) {
	es, err := mapping(n, field)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, e := range es {
		ms, err := strList(e.val, join(field, e.key))
		if err != nil {
			return nil, err
		}
		out[e.key] = ms
	}
	return out, nil
}

func credentials(n *yaml.Node, field string) ([]Credential, error) {
	if err := alias(n, field); err != nil {
		return nil, err
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, fieldErr(field, "want a list (line %d)", n.Line)
	}
	var out []Credential
	for i, item := range n.Content {
		cr := defaultsOf(credentialFields)
		if err := decode(credentialFields, item, fmt.Sprintf("%s[%d]", field, i), &cr); err != nil {
			return nil, err
		}
		out = append(out, cr)
	}
	return out, nil
}

func profiles(n *yaml.Node, field string) (map[string]ModelProfile, error) {
	es, err := mapping(n, field)
	if err != nil {
		return nil, err
	}
	out := map[string]ModelProfile{}
	for _, e := range es {
		prof := defaultsOf(profileFields)
		if err := decode(profileFields, e.val, join(field, e.key), &prof); err != nil {
			return nil, err
		}
		out[e.key] = prof
	}
	return out, nil
}

// LedgerURLOf reads ledger.url from a rotor.yaml leniently: unknown or
// invalid keys elsewhere do not matter ("" when the file names none, or
// is not YAML). rotor init --force carries it into the starter it writes
// over a file that may no longer load.
func LedgerURLOf(data []byte) string {
	var f struct {
		Ledger struct {
			URL string `yaml:"url"`
		} `yaml:"ledger"`
	}
	if yaml.Unmarshal(data, &f) != nil {
		return ""
	}
	return f.Ledger.URL
}
