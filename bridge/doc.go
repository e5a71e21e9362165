// Package bridge is the authenticated localhost bridge: it checks Host,
// browser origins and the caller's bearer token (client tokens stored as
// hashes in the ledger), strips everything that could claim an identity,
// and forwards to the runtime, in-process (an http.Handler) or standalone
// (a URL, with the runtime's own token).
//
// It knows the runtime only as an http.Handler or a URL, and imports no
// rotor package but internal/ helpers.
package bridge
