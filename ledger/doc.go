// Package ledger is rotor's SQLite usage ledger (modernc.org/sqlite, no
// cgo): usage rows and their rollups, budget definitions, client token
// hashes and learned-cooldown state, in one database file that several
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
package ledger
