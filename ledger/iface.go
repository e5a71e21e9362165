package ledger

import (
	"context"
	"errors"
	"time"
)

// Ledger is what rotor keeps in its ledger database, whichever engine holds
// it: SQLite (*Store, this package, the default) or PostgreSQL (package
// ledger/pgledger, for a team's shared ledger). The runtime, budgets, the
// CLI and reports use only this; SQL stays in the engines' packages.
type Ledger interface {
	// Location names the database in messages: the SQLite file's path, or
	// the PostgreSQL URL with its password masked. Never a secret.
	Location() string
	// Close waits for queued writes to commit, then closes the database.
	Close() error

	// Reserve admits and writes a reservation in one transaction that
	// serialises admission across every process on the database.
	Reserve(ctx context.Context, r Reservation, admit Admitter) error
	// Settle completes a reservation; it is durable when Settle returns.
	Settle(ctx context.Context, st Settlement) error
	// Release deletes a reservation that sent nothing upstream.
	Release(ctx context.Context, requestID string) error
	// Resolve records an operator's usage for a row of unknown usage.
	Resolve(ctx context.Context, res Resolution) error
	// View runs fn in one consistent read of budgets and windows.
	View(ctx context.Context, fn func(WindowReader) error) error

	Budgets(ctx context.Context) ([]BudgetRecord, error)
	PutBudget(ctx context.Context, b BudgetRecord, replace bool) error
	RemoveBudget(ctx context.Context, name string) error

	AddClientToken(ctx context.Context, label string, hash [32]byte, replace bool) error
	RevokeClientToken(ctx context.Context, label string) error
	ClientTokens(ctx context.Context) ([]ClientToken, error)
	LookupToken(ctx context.Context, hash [32]byte) (label string, ok bool, err error)
	// LookupTokenCached may answer from a list loaded a moment ago.
	LookupTokenCached(ctx context.Context, hash [32]byte) (label string, ok bool, err error)
	TouchTokens(ctx context.Context, used map[string]time.Time) error

	Prices(ctx context.Context) (map[string]Price, error)
	PutPrices(ctx context.Context, ps []Price, replace bool) (int, error)
	RemovePrice(ctx context.Context, model string) error

	Report(ctx context.Context, q ReportQuery) ([]ReportRow, error)
	Rows(ctx context.Context, from, to time.Time, limit int) ([]Row, error)
	// SetAside counts the rows whose usage could not be folded into the
	// rollups (see Store.SetAside).
	SetAside(ctx context.Context) (int64, error)

	GetLearned(ctx context.Context, id string, now time.Time) (LearnedRecord, bool, error)
	PutLearned(ctx context.Context, id string, state []byte, expected int64, now time.Time, capacity int, retention time.Duration) (int64, error)
}

var _ Ledger = (*Store)(nil)

// Location implements Ledger: the database file's path.
func (s *Store) Location() string { return s.path }

// ErrSchemaTooOld means a shared database's schema is older than this rotor
// knows: `rotor ledger migrate` upgrades it. A PostgreSQL ledger is never
// migrated by a bridge on its own (DESIGN, "A team ledger on PostgreSQL").
var ErrSchemaTooOld = errors.New("database schema is older than this rotor: run rotor ledger migrate")

// ErrNoFolder: a ledger file or a backup cannot be made because its folder
// does not exist; rotor does not create it.
var ErrNoFolder = errors.New("its folder does not exist")

// Importer takes what `rotor ledger copy` moves from one ledger into
// another. Every method is idempotent: copying twice adds nothing.
type Importer interface {
	// ImportRows writes the rows whose request id is not stored yet, as
	// they are (times, state, usage, cost), counting them in the rollups,
	// and returns how many it added.
	ImportRows(ctx context.Context, rows []Row) (added int, err error)
	// LearnedRecords returns every stored learned-cooldown record.
	LearnedRecords(ctx context.Context) ([]LearnedRecord, error)
	// ImportLearned writes the records whose id is not stored yet, within
	// PutLearned's bounds at now: none already expired, none past
	// capacity live records, none living past its creation plus retention.
	ImportLearned(ctx context.Context, recs []LearnedRecord, now time.Time, capacity int, retention time.Duration) (added int, err error)
	// ImportClientTokens writes the tokens whose label is not stored yet,
	// with their creation and last-use times, and returns how many it
	// added; they bind every runtime at its next admission.
	ImportClientTokens(ctx context.Context, toks []ClientToken) (added int, err error)
	// ImportPrices writes the prices whose model has none stored yet, as
	// they are (source and update time), and returns how many it added:
	// a price stored since the caller looked is kept, never replaced.
	ImportPrices(ctx context.Context, ps []Price) (added int, err error)
	// PrunedUsage returns the usage a prune deleted from the rows, as
	// the rollups keep it (pruned.go); empty when never pruned.
	PrunedUsage(ctx context.Context) (PrunedUsage, error)
	// ImportPruned adds another ledger's pruned usage to the rollups and
	// moves the prune frontier to its cut, in one transaction, and
	// returns the requests it added: none when its own pruned usage
	// already is p. A ledger holding other usage before the cut refuses
	// it with ErrPrunedOverlap, writing nothing.
	ImportPruned(ctx context.Context, p PrunedUsage) (added int64, err error)
}
