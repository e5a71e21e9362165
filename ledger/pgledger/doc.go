// Package pgledger is rotor's ledger on PostgreSQL (github.com/jackc/pgx/v5):
// the same rows, budgets, client tokens, prices and learned-cooldown state
// as the SQLite ledger (package ledger), shared by rotor processes on many
// machines. *Store implements ledger.Ledger and ledger.Importer with the
// SQLite ledger's semantics (the conformance suite, ledger/conformance,
// runs on both); the SQL that differs from SQLite's lives here only.
//
// # What is where
//
//	pgledger.go   Open (never migrates; refuses an older or newer schema),
//	              Migrate (numbered migrations/NNNN_*.sql in one transaction
//	              under an advisory lock), error mapping to ErrUnavailable
//	writer.go     the group commit and a batch's writes
//	carry.go      the windows a lone process carries from batch to batch
//	view.go       ledger.WindowReader over a transaction; View
//	config.go     budgets, client tokens, prices (the change counter)
//	report.go     Report, Rows, ImportRows
//	resolve.go    Resolve (`rotor ledger settle`)
//	prune.go      Prune (`rotor ledger prune`): settled rows go, rollups
//	              stay; meta pruned_until rounds reads there to buckets
//	pruned.go     PrunedUsage, ImportPruned (`rotor ledger copy` of a
//	              pruned ledger: its pruned usage, as rollups)
//	learned.go    learned-cooldown state
//
// The database's URL is printed masked, always (internal/dburl.Mask).
//
// # Admission
//
// Reserve, Settle, Release and Resolve join one queue; the caller that
// finds no batch running leads and commits everything queued, batch after
// batch (ledger.GroupCommit, the SQLite engine's too). A batch is one
// transaction on a pooled connection, and its first round trip is BEGIN,
// the batch's own settings (plan_cache_mode force_generic_plan: its
// prepared statements are planned once, not at every execution;
// enable_seqscan off: each of those plans uses its index, even one made
// while the tables were small),
// pg_advisory_xact_lock(key of the schema's name) and then, in a later
// statement whose snapshot sees every batch committed before, the change
// counter (meta.config_version), the usage version (meta.usage_version,
// bumped by every transaction that writes rows or rollups), the
// database's clock and the rows that left the windows this process
// carries (carry.go). When no other process wrote since this process's
// last commit, an admission batch takes two round trips (that one, and
// the writes with COMMIT): its windows are the ones its last admission
// batch read, kept exact by its own writes since. Otherwise it takes
// three: the second reads ahead the windows the last admission batch
// read. A batch of settlements and releases of this process's own
// reservations, which reads nothing, sends all of it, COMMIT included, in
// one. Budgets, tokens
// and prices are re-read only when the counter moved; every change to them
// bumps it in its own transaction. Reservations are admitted first, each
// by its Admitter over the batch's view, then settlements and releases; the
// rows and the rollup upserts (one per bucket the batch touched) go with
// COMMIT in the last round trip, so every acknowledged write is committed.
// A settlement or release whose reservation is gone fails its guarded
// statement; the batch then rolls back and its writes are retried one by
// one. Advisory-lock keys derive from the schema's name, so ledgers in
// different schemas of one database never wait for each other.
//
// Times: row times and windows come from the database's clock_timestamp(),
// read once per batch after the lock, so machines with skewed clocks
// agree; Options.Clock (tests) replaces it.
//
// # Which read uses which table
//
//	read                       tables
//	Totals (budget windows)    usage_day (whole UTC days), usage_hour (whole
//	                           hours), usage_minute (whole minutes), usage
//	                           (raw edges; an edge is read as
//	                           its minute's row less the rest of the minute
//	                           when that is shorter). A window ending now
//	                           reads through every later row (rows stamped
//	                           after now by a clock since stepped back), all
//	                           of it from the rollups. In a
//	                           batch, windows already read are kept exact by
//	                           each write's delta, and the last batch's
//	                           windows are read ahead in one round trip.
//	Reach, NewestUnknownCost   usage_day, usage_hour, usage_minute, usage,
//	                           descending only into the bucket that holds
//	                           the answer (NewestUnknownCost: past buckets
//	                           whose unknown cost is only requests in
//	                           flight, read from usage)
//	InFlight                   usage through usage_open (open rows by time)
//	Report                     usage_hour_dims (whole hours; open
//	                           reservations are its status-0 rows), usage
//	                           (the partial hours at the edges)
//	Rows                       usage (usage_ts)
//	LookupToken                meta (the counter), client_tokens when it moved
//
// The rollups count every row, open or settled, and are written in the
// transaction of the batch that writes the rows, so no fold frontier is
// kept: a read never depends on how far a background fold got. The one
// frontier is the prune's (meta pruned_until, prune.go): a range that
// starts or ends before it is read from whole minutes (windows) or hours
// (reports) there, since its raw rows may be gone. Unknown values
// (NULL, or outside 0..ledger.MaxUsage) are counted, never summed as zero;
// sums saturate at ±ledger.SumCap.
//
// # Failures
//
// An unreachable, restarting or hung server, or a terminated connection,
// fails the call with an error wrapping ledger.ErrUnavailable, at the
// latest at its context's deadline (opTimeout without one); the pool
// replaces broken connections by itself, and the next batch takes a
// healthy one.
package pgledger
