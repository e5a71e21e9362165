package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/rotorhq/rotor/internal/dur"
)

// Starter is the commented rotor.yaml that `rotor init` writes: every key
// of the tables with its default and its doc. It parses to the defaults.
var Starter = []byte(starter())

const starterHeader = `# rotor.yaml: rotor's configuration. Every key below shows its default.
# ROTOR_* environment variables override single keys (ROTOR_RUNTIME_LISTEN
# for runtime.listen, lists comma-separated); command-line flags override
# those. Unknown keys are errors. ` + "`rotor config check`" + ` validates this file.
`

// sectionDocs are the starter's comments above a top-level key or section.
var sectionDocs = map[string]string{
	"model_cooldown": `The spec's settings. MODEL_COOLDOWN_ENABLED and MODEL_COOLDOWN_MAX_SECONDS
in the environment win over these; a malformed value logs one warning and
disables the feature.`,
	"learned_cooldown": `LEARNED_COOLDOWN_MODE, LEARNED_COOLDOWN_POLICY_JSON and
INTELLIGENCE_STORAGE_BACKEND in the environment win over these.`,
	"pools": `Credential pools: api serves models prefixed api/, zdr serves zdr/.
Keys never live in this file: name an environment variable or a file.`,
}

// poolDocs are the starter's comments on each pool.
var poolDocs = map[string]string{
	PoolAPI: "serves model prefix api/",
	PoolZDR: "serves zdr/, the same keys as api; every credential here is operator-declared ZDR",
}

// line is one "key: value  # doc" line of the starter before alignment.
type line struct{ indent, text, doc string }

func starter() string {
	var b strings.Builder
	b.WriteString(starterHeader)
	var block []line
	section := "\x00"
	d := Default()
	for _, f := range settings {
		sec, key, nested := strings.Cut(f.key, ".")
		if !nested {
			sec, key = f.key, f.key
		}
		if sec != section && (nested || section != "" || sectionDocs[sec] != "") {
			writeBlock(&b, block)
			block = nil
			b.WriteString("\n")
			if d := sectionDocs[sec]; d != "" {
				b.WriteString(comment("", d))
			}
			if nested {
				block = append(block, line{text: sec + ":"})
			}
		}
		section = ""
		if nested || sectionDocs[sec] != "" {
			section = sec
		}
		if f.key == "pools" {
			block = append(block, poolLines()...)
			continue
		}
		indent := ""
		if nested {
			indent = "  "
		}
		block = append(block, line{indent, key + ": " + yamlValue(f.ptr(&d)), f.doc})
	}
	writeBlock(&b, block)
	return b.String()
}

func poolLines() []line {
	out := []line{{text: "pools:"}}
	d := defaultsOf(poolFields)
	out = append(out, line{"  ", PoolAPI + ":", poolDocs[PoolAPI]})
	for _, f := range poolFields {
		out = append(out, line{"    ", f.key + ": " + yamlValue(f.ptr(&d)), f.doc})
	}
	// A commented example credential, from the credential table.
	out = append(out, line{indent: "    # ", text: "credentials:"})
	first := "  - "
	var section string
	for _, f := range credentialFields {
		if f.example == "" {
			continue
		}
		sec, key, nested := strings.Cut(f.key, ".")
		indent := "    # " + first
		first = "    "
		if nested {
			if sec != section {
				out = append(out, line{indent, sec + ":", ""})
				section = sec
			}
			indent, f.key = indent+"  ", key
		}
		out = append(out, line{indent, f.key + ": " + f.example, f.doc})
	}
	return append(out, line{"  ", PoolZDR + ": {}", poolDocs[PoolZDR]})
}

// writeBlock writes lines with their comments aligned.
func writeBlock(b *strings.Builder, block []line) {
	width := 0
	for _, l := range block {
		if l.doc != "" {
			width = max(width, len(l.indent)+len(l.text))
		}
	}
	for _, l := range block {
		s := l.indent + l.text
		if l.doc != "" {
			s += strings.Repeat(" ", width-len(s)) + "  # " + l.doc
		}
		b.WriteString(s + "\n")
	}
}

func comment(indent, text string) string {
	return indent + "# " + strings.ReplaceAll(text, "\n", "\n"+indent+"# ") + "\n"
}

// yamlValue writes the value *p as the file writes it.
func yamlValue(p any) string {
	switch v := reflect.ValueOf(p).Elem().Interface().(type) {
	case time.Duration:
		return dur.Format(v)
	case string:
		if v == "" || strings.ContainsAny(v[:1], "{}[]&*!|>'\"%@`#,") {
			return "'" + v + "'"
		}
		return v
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case []string:
		return "[" + strings.Join(v, ", ") + "]"
	}
	switch v := reflect.ValueOf(p).Elem(); {
	case v.Kind() == reflect.Map && v.Len() == 0:
		return "{}"
	case v.Kind() == reflect.Slice && v.Len() == 0:
		return "[]"
	}
	panic(fmt.Sprintf("config: no starter form for a default of type %T", p))
}
