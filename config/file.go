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
	if len(bytes.TrimSpace(data)) == 0 {
		return c, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return c, &FieldError{Field: "(file)", Err: cleanYAMLError(err)}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return c, fieldErr("(file)", "want one YAML document")
	}
	p := parser{c: &c}
	if err := p.top(doc.Content[0]); err != nil {
		return c, err
	}
	return c, nil
}

func cleanYAMLError(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

type parser struct{ c *Config }

type entry struct {
	key  string
	val  *yaml.Node
	line int
}

func mapping(n *yaml.Node, path string) ([]entry, error) {
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

func scalar(n *yaml.Node, field string) (string, error) {
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

func (p *parser) top(n *yaml.Node) error {
	es, err := mapping(n, "")
	if err != nil {
		return err
	}
	c := p.c
	for _, e := range es {
		var err error
		switch e.key {
		case "catalog_ttl":
			err = durValue(e.val, e.key, &c.CatalogTTL)
		case "catalog_timeout":
			err = durValue(e.val, e.key, &c.CatalogTimeout)
		case "log":
			err = p.section(e, map[string]func(*yaml.Node, string) error{
				"level":  func(n *yaml.Node, f string) error { return strValue(n, f, &c.Log.Level) },
				"format": func(n *yaml.Node, f string) error { return strValue(n, f, &c.Log.Format) },
			})
		case "runtime":
			err = p.section(e, map[string]func(*yaml.Node, string) error{
				"listen":          func(n *yaml.Node, f string) error { return strValue(n, f, &c.Runtime.Listen) },
				"deadline":        func(n *yaml.Node, f string) error { return durValue(n, f, &c.Runtime.Deadline) },
				"token_file":      func(n *yaml.Node, f string) error { return strValue(n, f, &c.Runtime.TokenFile) },
				"error_body_idle": func(n *yaml.Node, f string) error { return durValue(n, f, &c.Runtime.ErrorBodyIdle) },
				"read_header_timeout": func(n *yaml.Node, f string) error {
					return durValue(n, f, &c.Runtime.ReadHeaderTimeout)
				},
				"read_timeout": func(n *yaml.Node, f string) error { return durValue(n, f, &c.Runtime.ReadTimeout) },
				"allowed_origins": func(n *yaml.Node, f string) (err error) {
					c.Runtime.AllowedOrigins, err = strList(n, f)
					return err
				},
				"max_buffered_mb": func(n *yaml.Node, f string) error {
					s, err := scalar(n, f)
					if err != nil {
						return err
					}
					v, err := strconv.ParseInt(s, 10, 64)
					if err != nil {
						return fieldErr(f, "want an integer, not %q (line %d)", s, n.Line)
					}
					c.Runtime.MaxBufferedMB = v
					return nil
				},
			})
		case "bridge":
			err = p.section(e, map[string]func(*yaml.Node, string) error{
				"listen":      func(n *yaml.Node, f string) error { return strValue(n, f, &c.Bridge.Listen) },
				"runtime_url": func(n *yaml.Node, f string) error { return strValue(n, f, &c.Bridge.RuntimeURL) },
				"allowed_origins": func(n *yaml.Node, f string) (err error) {
					c.Bridge.AllowedOrigins, err = strList(n, f)
					return err
				},
			})
		case "ledger":
			err = p.section(e, map[string]func(*yaml.Node, string) error{
				"synchronous":       func(n *yaml.Node, f string) error { return strValue(n, f, &c.Ledger.Synchronous) },
				"reservation_grace": func(n *yaml.Node, f string) error { return durValue(n, f, &c.Ledger.ReservationGrace) },
				"busy_timeout":      func(n *yaml.Node, f string) error { return durValue(n, f, &c.Ledger.BusyTimeout) },
			})
		case "model_cooldown":
			// The spec's own settings: kept raw, resolved by ResolveSpec,
			// where a malformed value disables the feature instead of
			// failing the start.
			err = p.section(e, map[string]func(*yaml.Node, string) error{
				"enabled":     rawInto(&c.ModelCooldown.rawEnabled),
				"max_seconds": rawInto(&c.ModelCooldown.rawMax),
			})
		case "learned_cooldown":
			err = p.section(e, map[string]func(*yaml.Node, string) error{
				"mode":        rawInto(&c.LearnedCooldown.rawMode),
				"policy_json": rawInto(&c.LearnedCooldown.rawPolicy),
				"storage":     rawInto(&c.LearnedCooldown.rawStorage),
			})
		case "pools":
			err = p.pools(e.val)
		default:
			err = unknown("", e)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func rawInto(p **string) func(*yaml.Node, string) error {
	return func(n *yaml.Node, f string) error {
		s, err := scalar(n, f)
		if err != nil {
			return err
		}
		*p = &s
		return nil
	}
}

func (p *parser) section(e entry, fields map[string]func(*yaml.Node, string) error) error {
	es, err := mapping(e.val, e.key)
	if err != nil {
		return err
	}
	for _, f := range es {
		set, ok := fields[f.key]
		if !ok {
			return unknown(e.key, f)
		}
		if err := set(f.val, join(e.key, f.key)); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) pools(n *yaml.Node) error {
	es, err := mapping(n, "pools")
	if err != nil {
		return err
	}
	for _, e := range es {
		base := "pools." + e.key
		if e.key != PoolAPI && e.key != PoolZDR {
			return fieldErr(base, "unknown pool (pools are api and zdr, one per model prefix) (line %d)", e.line)
		}
		pool := Pool{AuthRest: DefaultAuthRest}
		fs, err := mapping(e.val, base)
		if err != nil {
			return err
		}
		for _, f := range fs {
			field := join(base, f.key)
			switch f.key {
			case "first_key_fallback":
				err = boolValue(f.val, field, &pool.FirstKeyFallback)
			case "prefer_active":
				err = boolValue(f.val, field, &pool.PreferActive)
			case "auth_rest":
				err = durValue(f.val, field, &pool.AuthRest)
			case "quota_buckets":
				pool.QuotaBuckets, err = buckets(f.val, field)
			case "credentials":
				pool.Credentials, err = credentials(f.val, field)
			default:
				err = unknown(base, f)
			}
			if err != nil {
				return err
			}
		}
		p.c.Pools[e.key] = pool
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
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, fieldErr(field, "want a list (line %d)", n.Line)
	}
	var out []Credential
	for i, item := range n.Content {
		base := fmt.Sprintf("%s[%d]", field, i)
		es, err := mapping(item, base)
		if err != nil {
			return nil, err
		}
		cr := Credential{Enabled: true, Region: DefaultRegion}
		for _, e := range es {
			f := join(base, e.key)
			switch e.key {
			case "name":
				err = strValue(e.val, f, &cr.Name)
			case "enabled":
				err = boolValue(e.val, f, &cr.Enabled)
			case "region":
				err = strValue(e.val, f, &cr.Region)
			case "base_url":
				err = strValue(e.val, f, &cr.BaseURL)
				cr.BaseURL = strings.TrimRight(cr.BaseURL, "/")
			case "api_key_env":
				err = strValue(e.val, f, &cr.APIKeyEnv)
			case "api_key_file":
				err = strValue(e.val, f, &cr.APIKeyFile)
			case "api_key":
				// Never echo the value: it is a secret.
				err = fieldErr(f, "inline keys are refused (line %d); name an environment variable with api_key_env or a file with api_key_file", e.line)
			case "visibility":
				err = visibility(e.val, f, &cr.Visibility)
			case "model_profiles":
				cr.ModelProfiles, err = profiles(e.val, f)
			default:
				err = unknown(base, e)
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, cr)
	}
	return out, nil
}

func visibility(n *yaml.Node, field string, v *Visibility) error {
	es, err := mapping(n, field)
	if err != nil {
		return err
	}
	for _, e := range es {
		switch e.key {
		case "allow":
			v.Allow, err = strList(e.val, join(field, e.key))
		case "deny":
			v.Deny, err = strList(e.val, join(field, e.key))
		default:
			err = unknown(field, e)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func profiles(n *yaml.Node, field string) (map[string]ModelProfile, error) {
	es, err := mapping(n, field)
	if err != nil {
		return nil, err
	}
	out := map[string]ModelProfile{}
	for _, e := range es {
		base := join(field, e.key)
		fs, err := mapping(e.val, base)
		if err != nil {
			return nil, err
		}
		var prof ModelProfile
		for _, f := range fs {
			if f.key != "supported_endpoints" {
				return nil, unknown(base, f)
			}
			if prof.SupportedEndpoints, err = strList(f.val, join(base, f.key)); err != nil {
				return nil, err
			}
		}
		out[e.key] = prof
	}
	return out, nil
}
