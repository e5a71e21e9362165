package pgledger

import (
	"testing"

	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/learned/storetest"
	"github.com/rotorhq/rotor/ledger/learnedstore"
)

// A PostgreSQL ledger's learned state follows every rule the memory and
// SQLite stores do (learned.Store: revisions, capacity, expiry).
func TestLearnedStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) learned.Store {
		s, _ := open(t, Options{})
		return learnedstore.New(s)
	})
}
