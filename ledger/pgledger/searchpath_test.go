package pgledger

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/internal/testutil/pgtest"
)

// A team's ledger is in schema P. A second bridge's URL named a search_path
// whose first schema exists but is empty (search_path=team_e,P, or the
// default "$user",public once a schema named like the user appears): its
// tables resolved to P's, so it opened P's ledger, but it took the
// admission lock of the empty schema, and a 50-request budget admitted 51
// to 66 requests across two bridges (README: "the 50th request of a
// 50-request budget is admitted once among all bridges"); ledger migrate
// said "already current" and created nothing in the first schema. Both
// now refuse such a URL, naming the two schemas.
func TestSearchPathFallingThroughToALedgerIsRefused(t *testing.T) {
	ctx := context.Background()
	_, ledgerURL := open(t, Options{})
	empty, _ := pgtest.Schema(t) // exists, empty
	pu, _ := url.Parse(ledgerURL)
	eu, _ := url.Parse(empty)
	first, second := eu.Query().Get("search_path"), pu.Query().Get("search_path")
	q := pu.Query()
	q.Set("search_path", first+","+second)
	pu.RawQuery = q.Encode()
	if s, err := Open(ctx, pu.String(), Options{}); err == nil {
		s.Close()
		t.Errorf("Open with search_path=%s,%s: opened %s's ledger under %s's admission lock", first, second, second, first)
	} else if !strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), second) {
		t.Errorf("Open refused with %q; want it to name both schemas", err)
	}
	if _, _, err := Migrate(ctx, pu.String(), Options{}); err == nil {
		t.Errorf("Migrate with search_path=%s,%s: accepted", first, second)
	}
	// The schema alone still opens, and so does the empty one alone.
	for _, u := range []string{ledgerURL, empty} {
		if _, _, err := Migrate(ctx, u, Options{}); err != nil {
			t.Fatal(err)
		}
		s, err := Open(ctx, u, Options{})
		if err != nil {
			t.Fatalf("Open %s: %v", u, err)
		}
		s.Close()
	}
}
