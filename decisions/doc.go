// Package decisions is the runtime's native Decisions API route
// (spec/decisions-api.md): it checks the request (size, JSON, model
// prefix), admits it against the budgets in the ledger, discovers and
// filters credentials (catalog, visibility, operator profile), selects one
// through the credential pool (cooldowns), forwards the original body with
// only the routing prefix removed, fails over where that is safe, records
// outcomes and usage, and answers with the provider's body intact.
//
// It imports pool, budgets and ledger (through the small interfaces it
// declares) and internal/ helpers; it knows nothing of the bridge, cobra
// or configuration files.
package decisions
