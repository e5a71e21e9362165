//go:build race

package ledger_test

// raceEnabled scales down the tests that drive SQLite hardest: under the
// race detector the pure-Go SQLite runs many times slower.
const raceEnabled = true
