// Package budgets gives budget records their meaning: requests, tokens and
// cost limits over rolling or calendar (UTC) windows, their evaluation
// (ok, exhausted, fail-closed, and when they free), and admission of a
// request against all of them.
//
// The rules are spec/decisions-api.md's: every window counts all ledger
// rows whatever the budget's name; a cost budget whose window holds a row of
// unknown cost fails closed until that row leaves the window; while any
// cost budget exists, Decisions requests are refused with policy_blocked
// naming those budgets. Token budgets skip rows of unknown tokens.
//
// It imports ledger (for the WindowReader it evaluates against) and
// internal/ helpers only.
package budgets
