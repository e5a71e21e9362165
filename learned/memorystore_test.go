package learned_test

import (
	"testing"

	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/learned/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) learned.Store { return learned.NewMemoryStore(0) })
}
