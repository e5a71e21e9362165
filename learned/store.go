package learned

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limits of the learned-state storage domain, shared by every Store.
const (
	// StoreCapacity is the most live records a store holds (the spec's 1,024
	// entries or rows).
	StoreCapacity = 1024
	// Retention is how long a record lives after its creation. Puts never
	// extend it.
	Retention = 7 * 24 * time.Hour
	// MaxIDLength is the longest record ID, a hex identity digest.
	MaxIDLength = 128
	// MaxStateSize is the largest opaque state a store accepts.
	MaxStateSize = 1024
)

// Errors of the storage domain. Stores return them, or errors wrapping them,
// so that the learner can tell the fallbacks apart.
var (
	// ErrStaleRevision is a put whose expected revision is not the live
	// record's (0 when a live record exists, or nonzero when none does).
	ErrStaleRevision = errors.New("learned state: stale revision")
	// ErrCapacity is a put that would create a record while StoreCapacity
	// live records exist.
	ErrCapacity = errors.New("learned state: capacity reached")
	// ErrUnavailable is a store that cannot answer: a missing table, an
	// unavailable database, a timeout.
	ErrUnavailable = errors.New("learned state: storage unavailable")
	// ErrInvalidRecord is a put of a record no store may hold: an empty or
	// overlong ID, an empty or oversized state, a negative revision.
	ErrInvalidRecord = errors.New("learned state: invalid record")
)

// Record is one stored learned state.
type Record struct {
	// ID is the identity digest (hex) of one credential, provider, model
	// and quota bucket. It is never a name, a key or a key prefix.
	ID string
	// State is the learner's opaque encoded state.
	State []byte
	// Revision is the record's revision; 0 means absent. Every put gives a
	// larger one.
	Revision int64
	// CreatedAt is when the record was first put (millisecond precision).
	// Put ignores the field: a store sets it on creation and keeps it.
	CreatedAt time.Time
	// ExpiresAt is CreatedAt + Retention. Put ignores the field.
	ExpiresAt time.Time
}

// Store is the private storage domain of learned state: the spec's
// /v1/state/learned-cooldown, reduced to its two fixed operations. Every
// method takes the caller's wall-clock now, so that expiry is decided by
// one clock. Implementations must be safe for concurrent use, and also
// across processes when they share the storage.
type Store interface {
	// Get returns the live record id. An expired record reads as absent.
	Get(ctx context.Context, id string, now time.Time) (rec Record, ok bool, err error)
	// Put stores rec.State under rec.ID if the live record's revision is
	// expectedRevision (0: no live record may exist), and returns the new
	// revision. It first reclaims expired records, then checks, in the same
	// transaction, that creating a record leaves at most StoreCapacity live
	// ones (ErrCapacity otherwise; updates are always allowed). A created
	// record expires Retention after now; an updated one keeps its
	// CreatedAt and ExpiresAt.
	Put(ctx context.Context, rec Record, expectedRevision int64, now time.Time) (newRevision int64, err error)
}

// ValidateRecord checks the arguments of a put: what every Store refuses
// with an error wrapping ErrInvalidRecord before touching its storage.
func ValidateRecord(rec Record, expectedRevision int64) error {
	switch {
	case rec.ID == "" || len(rec.ID) > MaxIDLength:
		return fmt.Errorf("%w: id length out of range", ErrInvalidRecord)
	case len(rec.State) == 0 || len(rec.State) > MaxStateSize:
		return fmt.Errorf("%w: state size out of range", ErrInvalidRecord)
	case expectedRevision < 0:
		return fmt.Errorf("%w: negative revision", ErrInvalidRecord)
	}
	return nil
}
