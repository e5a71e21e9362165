package e2e

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rotorhq/rotor/internal/testutil/pgtest"
	"github.com/rotorhq/rotor/ledger/pgledger"
)

// Homes on several machines run `rotor init` at the same time against one
// migrated team schema (CI runners provisioned together). README, "For
// teams": labels are unique and each home's bridge.token gets default or
// default@<hostname>; one home never takes over another's. Every home's
// bridge.token must therefore be a token the shared ledger knows.
func TestConcurrentInitKeepsEveryHomesToken(t *testing.T) {
	base, _ := pgtest.Schema(t)
	const n = 4
	homes := make([]*e2e, n)
	for i := range homes {
		homes[i] = newE2E(t)
		homes[i].env = append(homes[i].env, "ROTOR_DB="+base)
	}
	homes[0].mustRun("ledger", "migrate")
	for range 5 {
		for _, h := range homes {
			os.RemoveAll(h.home)
		}
		var wg sync.WaitGroup
		for _, h := range homes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r := h.run("init"); r.code != 0 {
					t.Errorf("init: exit %d: %s", r.code, r.stderr)
				}
			}()
		}
		wg.Wait()
		s, err := pgledger.Open(context.Background(), base, pgledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range homes {
			b, err := os.ReadFile(filepath.Join(h.home, "bridge.token"))
			if err != nil {
				t.Fatal(err)
			}
			label, ok, err := s.LookupToken(context.Background(), sha256.Sum256([]byte(strings.TrimSpace(string(b)))))
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Errorf("home %d: its bridge.token is not in the shared ledger (another home's init replaced it under the same label); its bridge answers 401", i)
			} else {
				t.Logf("home %d: %s", i, label)
			}
		}
		s.Close()
		if t.Failed() {
			return
		}
	}
}
