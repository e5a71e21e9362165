package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"

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

func addFormatFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "format", FormatTable, "output format: table, json (an array of row objects) or csv (with a header row)")
}

func checkFormat(format string) error {
	switch format {
	case FormatTable, FormatJSON, FormatCSV:
		return nil
	}
	return usageErrorf("--format %q: want table, json or csv", format)
}

// write prints recs in format. JSON is an array of objects whose keys are
// the column names in order; CSV has a header row.
func (r records) write(w io.Writer, format string) error {
	switch format {
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
		cw := csv.NewWriter(w)
		if err := cw.Write(r.Columns); err != nil {
			return err
		}
		for _, row := range r.Rows {
			line := make([]string, len(row))
			for j, c := range row {
				line[j] = c.Text
				if c.CSV != "" {
					line[j] = c.CSV
				}
			}
			if err := cw.Write(line); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
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
				line[j] = c.Text
			}
			if err := t.Append(line); err != nil {
				return err
			}
		}
		return t.Render()
	}
}

// jsonNumber prints a decimal string as a JSON number without going through
// a float.
type jsonNumber string

// MarshalJSON implements json.Marshaler.
func (n jsonNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }
