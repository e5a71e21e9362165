// Package decisions is the runtime's one dispatch core: the native
// Decisions API route (spec/decisions-api.md) and the OpenAI-compatible
// routes beside it (POST /v1/responses, /v1/chat/completions,
// /v1/embeddings; GET /v1/models). For every route it checks the request
// (size, JSON, model prefix), admits it against the budgets in the ledger,
// discovers and filters credentials (catalog, visibility, operator
// profile), selects one through the credential pool (cooldowns), forwards
// the original body with only the routing prefix removed, classifies the
// answer (classify, a pure function) and fails over where that is safe,
// records outcomes and usage, and answers with the provider's body intact
// or, for a stream, event by event (stream.go). What differs between the
// routes is a Kind (kind.go): path, eligibility, deadline, usage fields
// and two error names.
//
// It imports pool, budgets and ledger (through the small interfaces it
// declares) and internal/ helpers; it knows nothing of the bridge, cobra
// or configuration files.
package decisions
