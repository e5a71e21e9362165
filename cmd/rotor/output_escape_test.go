package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// controlBytes returns the control bytes of s other than the newlines that
// end the table's own lines.
func controlBytes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\n') || c == 0x7f {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// A price file's name is stored as the prices' source and printed by
// pricing import and pricing list: an escape sequence, a carriage return or
// a newline in it reaches the terminal as visible text, never as a cursor
// move, a cleared line or a table line of its own.
func TestPricingSourceWithControlCharactersPrintsVisibly(t *testing.T) {
	ctx := context.Background()
	f, out, _ := fakeFactory(t, nil, nil)
	name := "x\x1b[2K\x1b[1A\rforged\nrow.json"
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(`{"gpt-x":{"input_cost_per_token":0.000001,"output_cost_per_token":0.000002}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := pricingImportRun(ctx, &pricingImportOptions{IO: f.IO, Ledger: f.LedgerOrCreate, Path: path}); err != nil {
		t.Fatal(err)
	}
	if c := controlBytes(out.String()); c != "" || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("pricing import printed control bytes %q in %q", c, out)
	}
	out.Reset()
	if err := pricingListRun(ctx, &listOptions{IO: f.IO, Ledger: f.Ledger, Format: FormatTable}); err != nil {
		t.Fatal(err)
	}
	// Top border, header, separator, one row, bottom border.
	if c := controlBytes(out.String()); c != "" || strings.Count(out.String(), "\n") != 5 {
		t.Errorf("pricing list printed control bytes %q, %d lines:\n%s", c, strings.Count(out.String(), "\n"), out)
	}
}

// Every table goes through records.write: a cell holding control
// characters, a tab or invalid UTF-8 prints escaped, one line a row; a
// printable one prints as it is.
func TestTableCellsEscapeControlCharacters(t *testing.T) {
	recs := records{Columns: []string{"label", "model"}, Rows: [][]cell{
		{textCell("a\x1b]0;title\x07b"), textCell("c\td")},
		{textCell("e\rf"), textCell("g\xffh\u009bi")},
		{textCell("team-a"), textCell("gpt-4o·mini")},
	}}
	var b strings.Builder
	if err := recs.write(&b, FormatTable); err != nil {
		t.Fatal(err)
	}
	if c := controlBytes(b.String()); c != "" || strings.Count(b.String(), "\n") != 7 {
		t.Errorf("table printed control bytes %q:\n%s", c, b.String())
	}
	if !strings.Contains(b.String(), `\x1b]0;title\ab`) || !strings.Contains(b.String(), "gpt-4o·mini") {
		t.Errorf("table does not show the escape visibly, or changed a printable value:\n%s", b.String())
	}
}

// A server's answer quoted in an error (rotor status or bridge reload
// against a --url that is no bridge) prints visibly and bounded: a web
// server's page or a hostile one's escape sequences reach the terminal as
// at most 512 bytes of text.
func TestServerAnswerInAnErrorIsVisibleAndBounded(t *testing.T) {
	page := "\x1b[2J\x1b[Hboom\r\n" + strings.Repeat("<p>page</p>", 10_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, page, http.StatusInternalServerError)
	}))
	defer srv.Close()
	for _, args := range [][]string{{"status", "--url", srv.URL}, {"bridge", "reload", "--url", srv.URL}} {
		f, _, errOut := testFactory(t)
		t.Setenv("ROTOR_TOKEN", "status-test-token-0123456789abcdef0123456789")
		if code := run(context.Background(), f, args); code == 0 {
			t.Errorf("%v: exit 0 against a server answering 500", args)
		}
		got := errOut.String()
		if c := controlBytes(got); c != "" || len(got) > 2048 || !strings.Contains(got, `\x1b[2J\x1b[Hboom`) {
			t.Errorf("%v: stderr (%d bytes) holds control bytes %q or is not the visible, bounded answer:\n%.600s", args, len(got), c, got)
		}
	}
}
