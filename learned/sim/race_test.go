//go:build race

package sim

// raceEnabled: the race detector slows the simulation tenfold, so the
// tests run shorter spans under it.
const raceEnabled = true
