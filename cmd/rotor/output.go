package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/itchyny/gojq"
	"github.com/olekukonko/tablewriter"
	"github.com/spf13/cobra"
)

// Output formats of every command that prints records.
const (
	FormatTable = "table"
	FormatJSON  = "json"
	FormatCSV   = "csv"
)

// cell is one value: JSON is what the json format prints (nil is null),
// Text what table and csv print; CSV, when set, is what csv prints instead
// (so that csv gives the same number json does).
type cell struct {
	JSON any
	Text string
	CSV  string
	// EmptyCSV prints an empty csv field (an unknown value in ledger
	// rows), whatever Text says.
	EmptyCSV bool
}

func textCell(s string) cell { return cell{JSON: s, Text: s} }

func intCell(v int64) cell { return cell{JSON: v, Text: fmt.Sprint(v)} }

// unknownCell is a value rotor does not know: null in json, "unknown" in
// table and csv, never 0.
var unknownCell = cell{JSON: nil, Text: "unknown"}

// countCell is v when known, else unknownCell.
func countCell(v int64, known bool) cell {
	if !known {
		return unknownCell
	}
	return intCell(v)
}

// records is a printable list: column names and rows of cells.
type records struct {
	Columns []string
	Rows    [][]cell
}

// FormatJSONL, one JSON object a line, only where a command says so
// (ledger rows).
const FormatJSONL = "jsonl"

// formatFlag holds --format and --jq of one command; it sets the command's
// format string to what write understands: a plain format, or --jq's
// expression marked (jqMark), or a conflict checkFormat reports.
type formatFlag struct {
	p          *string
	format, jq string
	formatSet  bool
	jqSet      bool
}

// Marks inside a format string; a format a user types never holds \x00.
const (
	jqMark       = "jq\x00"
	jqConflictMk = "jqconflict\x00"
)

func (f *formatFlag) update() {
	switch {
	case !f.jqSet:
		*f.p = f.format
	case f.formatSet && f.format != FormatJSON:
		*f.p = jqConflictMk + f.format
	default:
		*f.p = jqMark + f.jq
	}
}

type formatValue struct{ f *formatFlag }

func (v formatValue) String() string {
	if v.f == nil {
		return ""
	}
	return v.f.format
}
func (v formatValue) Set(s string) error {
	v.f.format, v.f.formatSet = s, true
	v.f.update()
	return nil
}
func (v formatValue) Type() string { return "string" }

type jqValue struct{ f *formatFlag }

func (v jqValue) String() string {
	if v.f == nil {
		return ""
	}
	return v.f.jq
}
func (v jqValue) Set(s string) error {
	v.f.jq, v.f.jqSet = s, true
	v.f.update()
	return nil
}
func (v jqValue) Type() string { return "expression" }

// formatValues are the --format values every record command takes (for
// completion); ledger rows adds jsonl.
var formatValues = []string{FormatTable, FormatJSON, FormatCSV}

func addFormatFlag(cmd *cobra.Command, p *string) {
	addFormatFlagUsage(cmd, p, "output format: table, json (an array of row objects) or csv (with a header row)", formatValues)
}

// addFormatFlagUsage adds --format (with usage and completion values) and
// --jq to cmd.
func addFormatFlagUsage(cmd *cobra.Command, p *string, usage string, values []string) {
	f := &formatFlag{p: p, format: FormatTable}
	*p = FormatTable
	cmd.Flags().Var(formatValue{f}, "format", usage)
	cmd.Flags().Lookup("format").DefValue = FormatTable
	cmd.Flags().Var(jqValue{f}, "jq", "filter the json output with a jq expression (implies --format json; strings print raw)")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("jq", cobra.NoFileCompletions)
}

func checkFormat(format string) error {
	return checkFormatIn(format, formatValues)
}

// checkFormatIn checks format against values, and --jq's expression.
func checkFormatIn(format string, values []string) error {
	if expr, ok := strings.CutPrefix(format, jqMark); ok {
		if _, err := compileJQ(expr); err != nil {
			return err
		}
		return nil
	}
	if other, ok := strings.CutPrefix(format, jqConflictMk); ok {
		return usageErrorf("--jq filters json output: it cannot go with --format %s", other)
	}
	for _, v := range values {
		if format == v {
			return nil
		}
	}
	return usageErrorf("--format %q: want %s", format, strings.Join(values, ", "))
}

// isJSONFormat reports whether format prints json: json, or --jq.
func isJSONFormat(format string) bool {
	return format == FormatJSON || strings.HasPrefix(format, jqMark)
}

func compileJQ(expr string) (*gojq.Code, error) {
	q, err := gojq.Parse(expr)
	if err != nil {
		return nil, usageErrorf("--jq %q: %v", expr, err)
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, usageErrorf("--jq %q: %v", expr, err)
	}
	return code, nil
}

// writeJSON prints a json document: as it is for json, or through --jq's
// expression, as gh does: each result a line, strings raw, anything else
// compact json.
func writeJSON(w io.Writer, format string, doc []byte) error {
	expr, ok := strings.CutPrefix(format, jqMark)
	if !ok {
		_, err := w.Write(doc)
		return err
	}
	code, err := compileJQ(expr)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	v = jqNumbers(v)
	var buf bytes.Buffer
	iter := code.Run(v)
	for {
		x, ok := iter.Next()
		if !ok {
			break
		}
		if err, ok := x.(error); ok {
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				break
			}
			if _, werr := w.Write(buf.Bytes()); werr != nil {
				return werr
			}
			return usageErrorf("--jq %q: %v", expr, err)
		}
		if s, ok := x.(string); ok {
			buf.WriteString(s)
		} else {
			b, err := gojq.Marshal(x)
			if err != nil {
				return err
			}
			buf.Write(b)
		}
		buf.WriteByte('\n')
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// jqNumbers turns json.Number into int where it is an integer, so that jq
// arithmetic and comparisons on counts are exact; decimals stay
// json.Number (gojq reads them as numbers).
func jqNumbers(v any) any {
	switch x := v.(type) {
	case []any:
		for i := range x {
			x[i] = jqNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = jqNumbers(x[k])
		}
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return int(i)
		}
	}
	return v
}

// write prints recs in format. JSON is an array of objects whose keys are
// the column names in order; CSV has a header row; JSONL is one such
// object a line. --jq filters the json form.
func (r records) write(w io.Writer, format string) error {
	if strings.HasPrefix(format, jqMark) {
		var buf bytes.Buffer
		if err := r.write(&buf, FormatJSON); err != nil {
			return err
		}
		return writeJSON(w, format, buf.Bytes())
	}
	switch format {
	case FormatJSONL:
		var buf bytes.Buffer
		for _, row := range r.Rows {
			buf.WriteString("{")
			for j, c := range row {
				if j > 0 {
					buf.WriteString(",")
				}
				k, _ := json.Marshal(r.Columns[j])
				v, err := json.Marshal(c.JSON)
				if err != nil {
					return err
				}
				buf.Write(k)
				buf.WriteString(":")
				buf.Write(v)
			}
			buf.WriteString("}\n")
		}
		_, err := w.Write(buf.Bytes())
		return err
	case FormatJSON:
		var buf bytes.Buffer
		buf.WriteString("[")
		for i, row := range r.Rows {
			if i > 0 {
				buf.WriteString(",")
			}
			buf.WriteString("\n  {")
			for j, c := range row {
				if j > 0 {
					buf.WriteString(", ")
				}
				k, _ := json.Marshal(r.Columns[j])
				v, err := json.Marshal(c.JSON)
				if err != nil {
					return err
				}
				buf.Write(k)
				buf.WriteString(": ")
				buf.Write(v)
			}
			buf.WriteString("}")
		}
		if len(r.Rows) > 0 {
			buf.WriteString("\n")
		}
		buf.WriteString("]\n")
		_, err := w.Write(buf.Bytes())
		return err
	case FormatCSV:
		return r.writeCSV(w, true)
	default:
		t := tablewriter.NewWriter(w)
		hdr := make([]any, len(r.Columns))
		for i, c := range r.Columns {
			hdr[i] = strings.ReplaceAll(c, "_", " ")
		}
		t.Header(hdr...)
		for _, row := range r.Rows {
			line := make([]string, len(row))
			for j, c := range row {
				line[j] = visible(c.Text)
			}
			if err := t.Append(line); err != nil {
				return err
			}
		}
		return t.Render()
	}
}

// serverSays is a server's answer body for an error message: visible, and
// at most 512 bytes of it (a --url naming a web server would otherwise
// print its whole page, escape sequences and all).
func serverSays(body []byte) string {
	const max = 512
	s := strings.TrimSpace(string(body))
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + " …"
	}
	return visible(s)
}

// visible returns s as a terminal may show it: unchanged when it is valid
// UTF-8 of printable characters, else with its control and other
// non-printable characters (escape sequences, carriage returns, newlines,
// tabs, bidi overrides) and invalid bytes written as Go escapes, so that a
// value (a price file's name, a row copied in from another ledger) never
// moves the cursor, retitles the terminal or starts a table line of its
// own. Machine formats (json, csv) keep the value as it is.
func visible(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// writeCSV prints recs as csv, with the header row when header is set (a
// later page of a stream has none).
func (r records) writeCSV(w io.Writer, header bool) error {
	cw := csv.NewWriter(w)
	if header {
		if err := cw.Write(r.Columns); err != nil {
			return err
		}
	}
	for _, row := range r.Rows {
		line := make([]string, len(row))
		for j, c := range row {
			line[j] = c.Text
			if c.CSV != "" {
				line[j] = c.CSV
			}
			if c.EmptyCSV {
				line[j] = ""
			}
		}
		if err := cw.Write(line); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// jsonNumber prints a decimal string as a JSON number without going through
// a float.
type jsonNumber string

// MarshalJSON implements json.Marshaler.
func (n jsonNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }
