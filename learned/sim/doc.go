// Package sim is the cooldown simulation of issue 19: it drives the real
// pool (pool.Pool's Select and Record, with a learner wired in as cmd/rotor
// wires it) on a fake clock against fake providers whose reset time is
// hidden, and compares cooldown policies side by side: the fixed 60 s
// fallback, a doubling ladder, the learner as the spec writes it, as rotor
// applies it, and with learned_cooldown.adapt on. Beside them it runs
// yardsticks no real policy can be: the Oracle, told each reset, and
// Retries, a plan told when to retry (for a reset whose distribution it
// was told).
//
// cmd/rotor-sim (scripts/sim-cooldown.sh) prints its table; the tests in
// this package hold the learner with adapt on to winning every cell.
//
// Package sim is a test and tooling harness: it imports pool, learned and
// internal/ helpers, and nothing imports it but cmd/rotor-sim.
package sim
