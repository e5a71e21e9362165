// Package ledger is rotor's SQLite usage ledger (modernc.org/sqlite, no
// cgo): usage rows and their rollups, budget definitions, client token
// hashes, prices and learned-cooldown state, in one database file that several
// rotor processes may share.
//
// All writes of usage go through one writer goroutine that group-commits:
// callers wait for the commit of the batch that holds their write, so an
// acknowledged write survives a process crash. Admission checks run inside
// the writer's immediate transaction, so parallel requests, also from other
// processes, never overrun a requests budget.
//
// It knows nothing of HTTP, pools or budgets' meaning: budgets evaluate
// their rules through the WindowReader it passes to an Admitter. SQL never
// leaves this package. It imports no rotor package but internal/ helpers.
//
// # The fast path
//
// A request writes its usage row only (batch.go, in writer.go's group
// commit); every aggregate is kept behind two frontiers in meta, which
// only rollup.go (writes), rollup_window.go (window reads), report.go
// (report reads) and rollup_pruned.go (`ledger copy` of pruned usage) use
// (TestRollupTablesStayBehindTheBoundary):
//
//   - fold_until (unix ms, migration 0006): every usage row before it is
//     counted in usage_minute and usage_hour_dims, no row at or after it.
//     The writer folds rows in, a chunk at a time, so that a request costs
//     two one-page commits, not three rollup upserts more.
//   - hour_rollup_until (an hour number, migration 0005): hours before it
//     have exact rows in usage_hour, written from their minutes a full hour
//     behind, so that a request's own writes touch no hour row.
//   - pruned_until (unix ms, absent = 0; prune.go): settled rows before it
//     may have been deleted by `ledger prune`, which cuts on whole hours;
//     only the rollups describe that time, and every read there rounds out
//     to their buckets.
//
// A write to a row behind fold_until (a settlement of a reservation that
// was folded while open) updates the rollups itself (addTotals, addDims).
//
// Which table each read uses:
//
//	read                        tables                                  frontier
//	Totals, Reach,              usage_hour (hours < hour_rollup_until),  both
//	NewestUnknownCost           usage_minute (other whole minutes),
//	(budget windows)            usage (edges, rows >= fold_until; open
//	                            rows, to skip requests in flight)
//	writer's windows ending     window cache (rollup_window.go), slid by  both, via the
//	now (admission)             the usage rows that left the window       cache's resets
//	Report (`ledger report`)    usage_hour_dims (whole hours), usage     fold_until; hour_rollup_until
//	                            (edges, rows >= fold_until, open rows)   to find open rows
//	InFlight (cost budgets)     this process's open rows (memory), else  none
//	                            usage (open rows of the last 24h)
//	Resolve (`ledger settle`)   usage, then the rollups' deltas as a     fold_until
//	                            settlement behind the frontier
//	Rows, SetAside              usage, meta                              none
//
// Why: a budget window or a report over a year of traffic then reads a
// bounded number of rollup rows and two short raw ranges, whatever the
// ledger's size; usage_hour_dims holds settled rows only, so a report reads
// unsettled rows raw from the hours whose totals exceed it. The window
// cache is dropped whenever it could be wrong: another connection
// committed, a batch rolled back, the clock went back, or fold set rows
// aside.
package ledger
